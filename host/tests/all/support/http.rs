//! A small HTTP/1.1 model server on 127.0.0.1 for provider tests: it answers each
//! request with the next scripted [`Reply`] and records what it was sent.
#![allow(dead_code)] // each test file uses a different part of it

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Notify;

/// One request as the server saw it.
#[derive(Clone, Debug)]
pub struct Recorded {
    /// `POST`, `GET` …
    pub method: String,
    /// The request target, e.g. `/v1/chat/completions`.
    pub path: String,
    /// Headers with lower-cased names.
    pub headers: Vec<(String, String)>,
    /// The body as text.
    pub body: String,
}

impl Recorded {
    /// A header's value.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }
    /// The body as JSON.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).expect("request body is JSON")
    }
}

/// A piece of a chunked (streamed) body.
#[derive(Clone, Debug)]
pub enum Chunk {
    /// Bytes sent as one HTTP chunk.
    Data(String),
    /// `len` copies of one byte, sent in 64 KiB chunks (huge bodies without the memory).
    Filler(u8, usize),
    /// Silence.
    Pause(Duration),
    /// Close the connection without finishing the body.
    Drop,
}

/// How the server answers one request.
#[derive(Clone, Debug)]
pub enum Reply {
    /// A complete body with Content-Length.
    Full {
        status: u16,
        headers: Vec<(String, String)>,
        body: String,
    },
    /// A chunked body (SSE streams).
    Chunked { status: u16, chunks: Vec<Chunk> },
    /// A chunked body with its own headers (e.g. a content type that is not SSE).
    Stream {
        status: u16,
        headers: Vec<(String, String)>,
        chunks: Vec<Chunk>,
    },
    /// Waits until the gate is opened (the test acts in between), then answers.
    After(Arc<Notify>, Box<Reply>),
    /// Close the connection without answering.
    Hangup,
}

impl Reply {
    /// A JSON body.
    pub fn json(status: u16, body: serde_json::Value) -> Self {
        Self::Full {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            body: body.to_string(),
        }
    }
    /// A raw body.
    pub fn text(status: u16, body: &str) -> Self {
        Self::Full {
            status,
            headers: vec![],
            body: body.into(),
        }
    }
    /// Adds a header to a `Full` reply.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        if let Self::Full { headers, .. } = &mut self {
            headers.push((name.into(), value.into()));
        }
        self
    }
    /// An SSE stream of `data:` events, one chunk each.
    pub fn sse(data: &[String]) -> Self {
        Self::Chunked {
            status: 200,
            chunks: data
                .iter()
                .map(|d| Chunk::Data(format!("data: {d}\n\n")))
                .collect(),
        }
    }
    /// `reply`, sent once `gate` is notified.
    pub fn after(gate: &Arc<Notify>, reply: Reply) -> Self {
        Self::After(gate.clone(), Box::new(reply))
    }
    /// An SSE stream of named events (`event:` + `data:`), one chunk each.
    pub fn sse_events(events: &[(&str, serde_json::Value)]) -> Self {
        Self::Chunked {
            status: 200,
            chunks: events
                .iter()
                .map(|(e, d)| Chunk::Data(format!("event: {e}\ndata: {d}\n\n")))
                .collect(),
        }
    }
}

/// The running server.
pub struct TestServer {
    /// `http://127.0.0.1:PORT`.
    pub url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
    /// Requests being answered now, and the most there ever were at once.
    in_flight: Arc<Mutex<(usize, usize)>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TestServer {
    /// Starts a server answering requests with `replies` in order; after the last one
    /// every request gets a 500 saying the script ran out.
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let replies = Arc::new(Mutex::new(std::collections::VecDeque::from(replies)));
        let recorded = requests.clone();
        let in_flight = Arc::new(Mutex::new((0, 0)));
        let counted = in_flight.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((sock, _)) = listener.accept().await else {
                    return;
                };
                let (recorded, replies) = (recorded.clone(), replies.clone());
                let counted = counted.clone();
                tokio::spawn(async move {
                    let _ = serve(sock, recorded, replies, counted).await;
                });
            }
        });
        Self {
            url,
            requests,
            in_flight,
            task,
        }
    }

    /// The most requests this server was answering at the same time.
    pub fn peak_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().1
    }

    /// Everything received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().unwrap().clone()
    }

    /// Waits (polling, with a deadline) until `n` requests have arrived.
    pub async fn wait_for_requests(&self, n: usize) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        while self.requests.lock().unwrap().len() < n {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the server got {} requests, expected {n}",
                self.requests.lock().unwrap().len()
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

async fn read_request(sock: &mut TcpStream) -> std::io::Result<Option<Recorded>> {
    let mut buf = Vec::new();
    let mut tmp = [0u8; 4096];
    let head_end = loop {
        if let Some(p) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break p;
        }
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&tmp[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let path = first.next().unwrap_or_default().to_owned();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let len: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < len {
        let n = sock.read(&mut tmp).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&tmp[..n]);
    }
    Ok(Some(Recorded {
        method,
        path,
        headers,
        body: String::from_utf8_lossy(&body).into_owned(),
    }))
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

async fn serve(
    mut sock: TcpStream,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    replies: Arc<Mutex<std::collections::VecDeque<Reply>>>,
    in_flight: Arc<Mutex<(usize, usize)>>,
) -> std::io::Result<()> {
    let Some(request) = read_request(&mut sock).await? else {
        return Ok(());
    };
    recorded.lock().unwrap().push(request);
    {
        let mut n = in_flight.lock().unwrap();
        n.0 += 1;
        n.1 = n.1.max(n.0);
    }
    let reply = replies
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or_else(|| Reply::text(500, "test server: no more replies"));
    let answered = answer(&mut sock, reply).await;
    in_flight.lock().unwrap().0 -= 1;
    answered
}

async fn answer(sock: &mut TcpStream, reply: Reply) -> std::io::Result<()> {
    match reply {
        Reply::Hangup => Ok(()),
        Reply::After(gate, reply) => {
            gate.notified().await;
            Box::pin(answer(sock, *reply)).await
        }
        Reply::Full {
            status,
            headers,
            body,
        } => {
            let mut out = format!(
                "HTTP/1.1 {status} {}\r\nconnection: close\r\ncontent-length: {}\r\n",
                reason(status),
                body.len()
            );
            for (n, v) in headers {
                out.push_str(&format!("{n}: {v}\r\n"));
            }
            out.push_str("\r\n");
            out.push_str(&body);
            sock.write_all(out.as_bytes()).await?;
            sock.shutdown().await
        }
        Reply::Chunked { status, chunks } => {
            let headers = vec![("content-type".into(), "text/event-stream".into())];
            chunked(sock, status, headers, chunks).await
        }
        Reply::Stream {
            status,
            headers,
            chunks,
        } => chunked(sock, status, headers, chunks).await,
    }
}

async fn chunked(
    sock: &mut TcpStream,
    status: u16,
    headers: Vec<(String, String)>,
    chunks: Vec<Chunk>,
) -> std::io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {status} {}\r\nconnection: close\r\ntransfer-encoding: chunked\r\n",
        reason(status)
    );
    for (n, v) in headers {
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    head.push_str("\r\n");
    sock.write_all(head.as_bytes()).await?;
    sock.flush().await?;
    for chunk in chunks {
        match chunk {
            Chunk::Data(d) => {
                sock.write_all(format!("{:x}\r\n{d}\r\n", d.len()).as_bytes())
                    .await?;
                sock.flush().await?;
            }
            Chunk::Filler(byte, mut len) => {
                let piece = vec![byte; 64 * 1024];
                while len > 0 {
                    let n = len.min(piece.len());
                    sock.write_all(format!("{n:x}\r\n").as_bytes()).await?;
                    sock.write_all(&piece[..n]).await?;
                    sock.write_all(b"\r\n").await?;
                    len -= n;
                }
                sock.flush().await?;
            }
            Chunk::Pause(d) => tokio::time::sleep(d).await,
            Chunk::Drop => return Ok(()),
        }
    }
    sock.write_all(b"0\r\n\r\n").await?;
    sock.shutdown().await
}

/// Builds provider `name` from a `[providers.NAME]` table's TOML, as `crewbox` would,
/// reading environment variables from `env` only.
pub fn build_provider(
    name: &str,
    toml_text: &str,
    env: &[(&str, &str)],
) -> Result<
    (
        Arc<dyn crewbox::unstable::provider::Provider>,
        crewbox::unstable::provider::Breakers,
    ),
    crewbox::unstable::provider::ProviderError,
> {
    let cfg: crewbox::unstable::provider::ProviderConfig =
        toml::from_str(toml_text).expect("config");
    let env: std::collections::HashMap<String, String> = env
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let lookup = move |k: &str| env.get(k).cloned();
    let breakers = crewbox::unstable::provider::Breakers::default();
    let clients = crewbox::unstable::provider::http::HttpClients::default();
    let ctx = crewbox::unstable::provider::BuildContext {
        breakers: &breakers,
        clients: &clients,
        base_dir: std::path::Path::new("."),
        env: &lookup,
        default_script: "",
        sandbox: &crewbox::unstable::sandbox::Sandbox::missing(),
    };
    let provider = crewbox::unstable::provider::build(name, &cfg, &ctx)?;
    Ok((provider, breakers))
}
