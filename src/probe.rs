//! `tessera probe URL`: a health check that needs nothing but this binary,
//! for containers built FROM scratch (no curl there).

use anyhow::{bail, Context, Result};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Splits `http://host:port/path` into the address to dial and the path.
fn split_url(url: &str) -> Result<(String, String)> {
    let rest = url
        .strip_prefix("http://")
        .with_context(|| format!("{url}: only http:// URLs are probed"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let authority = if authority.contains(':') {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    Ok((authority, path.to_string()))
}

/// GETs `url`; Ok when the answer is 200.
pub async fn probe(url: &str) -> Result<()> {
    let (addr, path) = split_url(url)?;
    let exchange = async {
        let mut stream = tokio::net::TcpStream::connect(&addr).await?;
        let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await?;
        let mut head = vec![0u8; 64];
        let n = stream.read(&mut head).await?;
        head.truncate(n);
        Ok::<_, std::io::Error>(head)
    };
    let head = tokio::time::timeout(std::time::Duration::from_secs(5), exchange)
        .await
        .context("timed out")?
        .with_context(|| format!("GET {url}"))?;
    let status_line = String::from_utf8_lossy(&head);
    match status_line.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        other => bail!("GET {url}: status {}", other.unwrap_or("missing")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_urls() {
        let (a, p) = split_url("http://127.0.0.1:9880/health").unwrap();
        assert_eq!((a.as_str(), p.as_str()), ("127.0.0.1:9880", "/health"));
        let (a, p) = split_url("http://dn1").unwrap();
        assert_eq!((a.as_str(), p.as_str()), ("dn1:80", "/"));
        assert!(split_url("https://x").is_err());
    }
}
