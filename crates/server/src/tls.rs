//! TLS for `serve --tls-cert FILE --tls-key FILE`: rustls with the ring provider, a
//! certificate chain and its private key read from PEM files.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::TlsAcceptor;

/// A server certificate and key, ready to accept TLS connections.
#[derive(Clone)]
pub struct Tls {
    acceptor: TlsAcceptor,
}

impl fmt::Debug for Tls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Tls")
    }
}

impl Tls {
    /// Read the certificate chain (leaf first) and the private key (PKCS#8, PKCS#1 or
    /// SEC1) from PEM files. The error names the file and what is wrong with it.
    pub fn from_pem_files(cert: &Path, key: &Path) -> Result<Tls, String> {
        let chain = CertificateDer::pem_file_iter(cert)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("{}: not a PEM certificate chain: {e}", cert.display()))?;
        if chain.is_empty() {
            return Err(format!("{}: holds no certificate", cert.display()));
        }
        let private = PrivateKeyDer::from_pem_file(key)
            .map_err(|e| format!("{}: not a PEM private key: {e}", key.display()))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| format!("TLS set-up: {e}"))?
            .with_no_client_auth()
            .with_single_cert(chain, private)
            .map_err(|e| {
                format!(
                    "{} and {}: the key does not fit the certificate: {e}",
                    cert.display(),
                    key.display()
                )
            })?;
        Ok(Tls {
            acceptor: TlsAcceptor::from(Arc::new(config)),
        })
    }

    pub(crate) fn acceptor(&self) -> &TlsAcceptor {
        &self.acceptor
    }
}
