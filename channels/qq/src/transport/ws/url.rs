//! Which WebSocket URLs `GET /gateway` may send the adapter to.
//!
//! The URL comes from the network, and the Identify that follows carries the access
//! token, so it is checked: for the real hosts it must be `wss`, on `sgroup.qq.com` or one
//! of its subdomains, port 443, without credentials or a fragment. When the configured
//! `api_url` is itself a loopback address (a fake in tests, a local proxy), a loopback
//! `ws://` or `wss://` URL on any port is accepted too; a real QQ URL still is.

use url::{Host, Url};

/// The domain QQ's gateways live under.
pub const QQ_DOMAIN: &str = "sgroup.qq.com";

/// Whether `api_url` names a loopback host (`127.0.0.0/8`, `::1`, `localhost`).
pub fn is_loopback_base(api_url: &str) -> bool {
    Url::parse(api_url).is_ok_and(|u| is_loopback(&u))
}

fn is_loopback(url: &Url) -> bool {
    match url.host() {
        Some(Host::Ipv4(ip)) => ip.is_loopback(),
        Some(Host::Ipv6(ip)) => ip.is_loopback(),
        Some(Host::Domain(d)) => d.eq_ignore_ascii_case("localhost"),
        None => false,
    }
}

/// Why a gateway URL was refused (safe to log: it names the host at most).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum UrlRefused {
    /// Not a URL at all.
    #[error("the gateway URL is not a URL")]
    NotAUrl,
    /// User info or a fragment.
    #[error("the gateway URL for {host} carries credentials or a fragment")]
    Credentials {
        /// The URL's host.
        host: String,
    },
    /// Not `wss://` on QQ's domain at port 443 (nor an accepted loopback URL).
    #[error("the gateway URL for {host} is not wss://*.sgroup.qq.com:443 (scheme {scheme})")]
    NotQq {
        /// The URL's host.
        host: String,
        /// The URL's scheme.
        scheme: String,
    },
}

/// The URL, if the adapter may connect to it; otherwise why not.
pub fn check_url(text: &str, allow_loopback: bool) -> Result<Url, UrlRefused> {
    let url = Url::parse(text.trim()).map_err(|_| UrlRefused::NotAUrl)?;
    let host = url.host_str().unwrap_or("").to_owned();
    if !url.username().is_empty() || url.password().is_some() || url.fragment().is_some() {
        return Err(UrlRefused::Credentials { host });
    }
    let qq_host = host.eq_ignore_ascii_case(QQ_DOMAIN)
        || host
            .to_ascii_lowercase()
            .strip_suffix(QQ_DOMAIN)
            .is_some_and(|prefix| prefix.ends_with('.') && prefix.len() > 1);
    if url.scheme() == "wss" && qq_host && url.port_or_known_default() == Some(443) {
        return Ok(url);
    }
    if allow_loopback && matches!(url.scheme(), "ws" | "wss") && is_loopback(&url) {
        return Ok(url);
    }
    Err(UrlRefused::NotQq {
        host,
        scheme: url.scheme().to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn real_hosts_must_be_wss_on_sgroup_qq_com_port_443() {
        for ok in [
            "wss://api.sgroup.qq.com/websocket",
            "wss://sandbox.api.sgroup.qq.com/websocket/",
            "wss://sgroup.qq.com:443/ws",
            "wss://API.SGROUP.QQ.COM/websocket",
        ] {
            assert!(check_url(ok, false).is_ok(), "{ok}");
            assert!(check_url(ok, true).is_ok(), "{ok}");
        }
        for bad in [
            "ws://api.sgroup.qq.com/websocket",
            "wss://api.sgroup.qq.com:8443/websocket",
            "wss://evilsgroup.qq.com/websocket",
            "wss://sgroup.qq.com.evil.example/websocket",
            "wss://.sgroup.qq.com/websocket",
            "wss://user:pw@api.sgroup.qq.com/websocket",
            "wss://api.sgroup.qq.com/websocket#x",
            "https://api.sgroup.qq.com/websocket",
            "ws://127.0.0.1:9/websocket",
            "not a url",
        ] {
            let error = check_url(bad, false).unwrap_err().to_string();
            assert!(!error.contains("pw"), "{error}");
        }
    }

    #[test]
    fn loopback_is_accepted_only_for_a_loopback_api_url() {
        assert!(is_loopback_base("http://127.0.0.1:8080"));
        assert!(is_loopback_base("http://[::1]:1"));
        assert!(is_loopback_base("http://localhost:1"));
        assert!(!is_loopback_base("https://api.sgroup.qq.com"));
        assert!(!is_loopback_base("http://10.0.0.1"));
        for ok in [
            "ws://127.0.0.1:9/websocket",
            "ws://localhost:1/",
            "wss://[::1]:2/x",
        ] {
            assert!(check_url(ok, true).is_ok(), "{ok}");
            assert!(check_url(ok, false).is_err(), "{ok}");
        }
        for bad in [
            "ws://10.0.0.1:9/websocket",
            "http://127.0.0.1:9/",
            "ws://a:b@127.0.0.1:9/",
        ] {
            assert!(check_url(bad, true).is_err(), "{bad}");
        }
    }
}
