//! The TLS trust of the https:// clients (the shop's webhooks, the shop's JWKS): the
//! system's roots, or the certificates of a CA file alone.

use std::path::Path;
use ureq::tls::{Certificate, RootCerts, TlsConfig};

/// The TLS configuration that trusts `ca_file`'s certificates alone, or the system's
/// roots without one.
pub fn tls(ca_file: Option<&Path>) -> Result<TlsConfig, String> {
    let roots = match ca_file {
        Some(path) => {
            let pem = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
            let certs: Vec<Certificate<'static>> = ureq::tls::parse_pem(&pem)
                .filter_map(|item| match item {
                    Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
                    _ => None,
                })
                .collect();
            if certs.is_empty() {
                return Err(format!("{}: no PEM certificate", path.display()));
            }
            RootCerts::new_with_certs(&certs)
        }
        None => RootCerts::PlatformVerifier,
    };
    Ok(TlsConfig::builder().root_certs(roots).build())
}
