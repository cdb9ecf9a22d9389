//! TLS for every HTTP client crewbox builds (model providers, MCP servers over HTTP,
//! OTLP export): rustls on *ring* with the webpki root store, so a fresh machine needs
//! no system certificate store and nothing links a C crypto library.
//!
//! reqwest is built without a crypto provider of its own (`rustls-no-provider`): a
//! client built before one is installed would panic. [`install`] makes *ring* the
//! process's default once (clients that other crates build inside, such as the OTLP
//! exporter's, pick it up), and [`client_builder`] hands out a builder with an explicit
//! configuration on top.

use std::sync::{Arc, Once};

/// Makes *ring* the process-wide rustls provider (once; later calls do nothing).
pub(crate) fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err: another provider is already installed (by an embedding program); it is
        // then the one used, which is the embedder's choice to make.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// A client configuration: *ring*, TLS 1.2 and 1.3, the webpki roots.
fn config() -> Result<rustls::ClientConfig, rustls::Error> {
    let roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
    };
    Ok(rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()?
    .with_root_certificates(roots)
    .with_no_client_auth())
}

/// A reqwest client builder with crewbox's TLS configuration.
pub(crate) fn client_builder() -> reqwest::ClientBuilder {
    install();
    let builder = reqwest::Client::builder();
    match config() {
        Ok(config) => builder.tls_backend_preconfigured(config),
        // Only if *ring* lacked every safe protocol version; the installed default
        // provider then decides.
        Err(_) => builder,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_client_builds_without_a_provider_of_reqwests_own() {
        assert!(super::client_builder().build().is_ok());
    }
}
