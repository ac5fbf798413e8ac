//! TLS to the database, as libpq's `sslmode` and `sslrootcert` ask: rustls (aws-lc-rs), the
//! system's roots plus the operator's `sslrootcert`.

use super::SslMode;
use crate::store::StateError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, Error, RootCertStore, SignatureScheme};
use std::path::Path;
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connector for `ssl` (unused with `disable`, which never starts TLS).
pub fn connector(ssl: SslMode, root_cert: Option<&Path>) -> Result<MakeRustlsConnect, StateError> {
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| StateError::Other(format!("state database TLS: {e}")))?;
    // libpq: `require` (and `prefer`) verify the chain only when a root certificate is given.
    let verify = match ssl {
        SslMode::Disable | SslMode::Prefer | SslMode::Require if root_cert.is_none() => Verify::Nothing,
        SslMode::VerifyFull => Verify::Full,
        _ => Verify::Chain,
    };
    let lenient = |chain| Arc::new(Lenient { chain, provider: provider.clone() });
    let config = match verify {
        Verify::Nothing => builder.dangerous().with_custom_certificate_verifier(lenient(None)),
        Verify::Chain | Verify::Full => {
            let roots = Arc::new(roots(root_cert)?);
            let webpki = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
                .build()
                .map_err(|e| StateError::Other(format!("state database TLS: {e}")))?;
            if verify == Verify::Full {
                builder.with_webpki_verifier(webpki)
            } else {
                builder.dangerous().with_custom_certificate_verifier(lenient(Some(webpki)))
            }
        }
    };
    Ok(MakeRustlsConnect::new(config.with_no_client_auth()))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verify {
    Nothing,
    Chain,
    Full,
}

/// The system's roots, and those in `root_cert` (PEM).
fn roots(root_cert: Option<&Path>) -> Result<RootCertStore, StateError> {
    let mut roots = RootCertStore::empty();
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = root_cert {
        let bad = |e: &dyn std::fmt::Display| StateError::Other(format!("sslrootcert {}: {e}", path.display()));
        let certs: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(path).map_err(|e| bad(&e))?.collect::<Result<_, _>>().map_err(|e| bad(&e))?;
        if certs.is_empty() {
            return Err(bad(&"no PEM certificate in it"));
        }
        for cert in certs {
            roots.add(cert).map_err(|e| bad(&e))?;
        }
    }
    if roots.is_empty() {
        return Err(StateError::Other(
            "state database TLS: no root certificate to verify the server with (set sslrootcert)".into(),
        ));
    }
    Ok(roots)
}

/// What `verify-full` does not: `verify-ca` (`chain`: it must lead to a root, whatever
/// name the certificate gives) and libpq's `require` without a root certificate (no
/// `chain`: encrypted, the server not verified). The handshake's signatures are always
/// verified.
#[derive(Debug)]
struct Lenient {
    chain: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl ServerCertVerifier for Lenient {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let Some(chain) = &self.chain else { return Ok(ServerCertVerified::assertion()) };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(Error::InvalidCertificate(CertificateError::NotValidForName))
            | Err(Error::InvalidCertificate(CertificateError::NotValidForNameContext { .. })) => {
                Ok(ServerCertVerified::assertion())
            }
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.provider.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider.signature_verification_algorithms.supported_schemes()
    }
}
