//! A throw-away certificate authority and a server certificate it signed, made with `openssl`, for servers
//! that tests run over TLS (etcd, the brokers' web service).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{find_in_path, require};

/// PEM files of a test CA and of a server certificate and key for `127.0.0.1` and `localhost`.
#[derive(Debug, Clone)]
pub struct TestCertificates {
    /// The CA's certificate: what clients trust.
    pub ca: PathBuf,
    /// The server's certificate, signed by the CA.
    pub cert: PathBuf,
    /// The server's private key.
    pub key: PathBuf,
}

impl TestCertificates {
    /// Makes them in `dir`, valid for two days (Debian package `openssl`).
    pub fn make(dir: &Path) -> TestCertificates {
        let openssl = require(find_in_path("openssl"), "openssl", "openssl");
        let run = |args: &[&str]| {
            let out = Command::new(&openssl)
                .args(args)
                .current_dir(dir)
                .output()
                .expect("run openssl");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        run(&[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-days",
            "2",
            "-subj",
            "/CN=loadmgr-test-ca",
        ]);
        run(&[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ]);
        std::fs::write(
            dir.join("ext.cnf"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\n",
        )
        .expect("ext.cnf");
        run(&[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext.cnf",
        ]);
        TestCertificates {
            ca: dir.join("ca.crt"),
            cert: dir.join("server.crt"),
            key: dir.join("server.key"),
        }
    }
}
