//! Bounded JSON reading: depth, key count and string length are enforced while the
//! document is read, so hostile input never builds a deep or wide tree first.
//!
//! serde_json's own recursion guard stops at 128 levels; ours stops at
//! [`Limits::MAX_DEPTH`] inside the visitor, before a container's children are read.

use std::cell::{Cell, RefCell};
use std::fmt;

use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Number, Value};

use crate::{HandoffError, Limits};

/// One step of a field path.
#[derive(Clone, Debug)]
pub(crate) enum Segment {
    /// An object key.
    Key(String),
    /// An array index.
    Index(usize),
}

/// Renders a path as `artifacts[0].title`; the empty path is `(root)`.
pub(crate) fn format_path(segments: &[Segment]) -> String {
    if segments.is_empty() {
        return "(root)".to_owned();
    }
    let mut out = String::new();
    for seg in segments {
        match seg {
            Segment::Index(i) => out.push_str(&format!("[{i}]")),
            Segment::Key(k) if is_plain_key(k) => {
                if !out.is_empty() {
                    out.push('.');
                }
                out.push_str(k);
            }
            Segment::Key(k) => {
                // Hostile keys can be 50,000 characters; a path is for people.
                let shown: String = k.chars().take(64).collect();
                let ellipsis = if shown.len() < k.len() { "…" } else { "" };
                let quoted = serde_json::to_string(&shown).unwrap_or_default();
                out.push_str(&format!("[{quoted}{ellipsis}]"));
            }
        }
    }
    out
}

fn is_plain_key(k: &str) -> bool {
    let mut chars = k.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && k.len() <= 64
}

/// Cuts `s` to at most [`Limits::MAX_STRING_CHARS`] characters, at a char boundary.
pub(crate) fn truncate(s: &str) -> String {
    match s.char_indices().nth(Limits::MAX_STRING_CHARS) {
        Some((cut, _)) => s[..cut].to_owned(),
        None => s.to_owned(),
    }
}

fn truncate_owned(s: String) -> String {
    match s.char_indices().nth(Limits::MAX_STRING_CHARS) {
        Some((cut, _)) => {
            let mut s = s;
            s.truncate(cut);
            s
        }
        None => s,
    }
}

/// State shared by every node of one document.
struct Ctx {
    keys: Cell<usize>,
    path: RefCell<Vec<Segment>>,
    failure: RefCell<Option<HandoffError>>,
}

impl Ctx {
    /// Records the typed failure and hands serde a placeholder error to unwind with.
    fn fail<E: de::Error>(&self, err: HandoffError) -> E {
        *self.failure.borrow_mut() = Some(err);
        E::custom("handoff bound exceeded")
    }

    fn path(&self) -> String {
        format_path(&self.path.borrow())
    }
}

/// Reads one JSON value at `depth` containers below the root.
#[derive(Clone, Copy)]
struct Node<'a> {
    ctx: &'a Ctx,
    depth: usize,
}

impl<'de> DeserializeSeed<'de> for Node<'_> {
    type Value = Value;

    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Node<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }

    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::Number(v.into()))
    }

    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        // JSON cannot spell NaN or infinity, so this is always a number.
        Ok(Number::from_f64(v).map_or(Value::Null, Value::Number))
    }

    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(truncate(v)))
    }

    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(truncate_owned(v)))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let ctx = self.ctx;
        let depth = self.depth + 1;
        if depth > Limits::MAX_DEPTH {
            return Err(ctx.fail(HandoffError::TooDeep {
                path: ctx.path(),
                limit: Limits::MAX_DEPTH,
            }));
        }
        let mut out = Vec::new();
        loop {
            ctx.path.borrow_mut().push(Segment::Index(out.len()));
            let next = seq.next_element_seed(Node { ctx, depth });
            ctx.path.borrow_mut().pop();
            match next? {
                Some(v) => out.push(v),
                None => return Ok(Value::Array(out)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let ctx = self.ctx;
        let depth = self.depth + 1;
        if depth > Limits::MAX_DEPTH {
            return Err(ctx.fail(HandoffError::TooDeep {
                path: ctx.path(),
                limit: Limits::MAX_DEPTH,
            }));
        }
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let key = truncate_owned(key);
            ctx.path.borrow_mut().push(Segment::Key(key.clone()));
            let keys = ctx.keys.get() + 1;
            ctx.keys.set(keys);
            if keys > Limits::MAX_KEYS {
                let err = HandoffError::TooManyKeys {
                    path: ctx.path(),
                    limit: Limits::MAX_KEYS,
                };
                return Err(ctx.fail(err));
            }
            let value = map.next_value_seed(Node { ctx, depth });
            ctx.path.borrow_mut().pop();
            out.insert(key, value?);
        }
        Ok(Value::Object(out))
    }
}

/// Parses `json` into a tree no deeper than [`Limits::MAX_DEPTH`], with at most
/// [`Limits::MAX_KEYS`] keys and strings cut to [`Limits::MAX_STRING_CHARS`].
pub(crate) fn read(json: &str) -> Result<Value, HandoffError> {
    if json.len() > Limits::MAX_INPUT_BYTES {
        return Err(HandoffError::InputTooLarge {
            bytes: json.len(),
            limit: Limits::MAX_INPUT_BYTES,
        });
    }
    let ctx = Ctx {
        keys: Cell::new(0),
        path: RefCell::new(Vec::new()),
        failure: RefCell::new(None),
    };
    let mut de = serde_json::Deserializer::from_str(json);
    let result = Node {
        ctx: &ctx,
        depth: 0,
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    result.map_err(|e| match ctx.failure.take() {
        Some(bound) => bound,
        None => syntax(&e),
    })
}

fn syntax(e: &serde_json::Error) -> HandoffError {
    let full = e.to_string();
    let suffix = format!(" at line {} column {}", e.line(), e.column());
    let message = full.strip_suffix(&suffix).unwrap_or(&full).to_owned();
    HandoffError::Syntax {
        line: e.line(),
        column: e.column(),
        message,
    }
}
