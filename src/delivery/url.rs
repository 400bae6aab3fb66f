//! Which webhook URLs almanac posts to.
//!
//! Only `http` and `https`. A URL from the config goes wherever it says
//! (the user wrote it). A URL the model gave ([`UrlOrigin::Model`]) must
//! not reach the machine or its networks — loopback, private (RFC 1918,
//! unique-local `fc00::/7`), link-local, shared (CGNAT `100.64.0.0/10`),
//! unspecified, multicast and reserved addresses, also written as IPv4
//! inside IPv6 (mapped, compatible, NAT64, 6to4) — unless
//! `delivery.webhook.allowPrivateNetwork` allows it. An address in the URL
//! and `localhost` are refused by [`check_url`]; any other name is checked
//! when it is resolved, by the resolver of the client that connects
//! ([`GuardedResolver`]): every address it resolves to must be public,
//! and those very addresses are the ones connected to, so a name that
//! changes its answer between a check and the connection (DNS rebinding)
//! cannot slip through. That client follows no redirect and uses no
//! proxy.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use serde::{Deserialize, Serialize};

/// Who gave a webhook URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(crate) enum UrlOrigin {
    /// The user's config.
    Config,
    /// The model (a tool call, a job it scheduled).
    Model,
}

/// Why a URL is not posted to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub(crate) enum UrlRefused {
    #[error("`{0}` is not a URL")]
    NotAUrl(String),
    #[error("only http and https URLs are posted to, not `{0}:`")]
    Scheme(String),
    #[error("the URL has no host")]
    NoHost,
    #[error(
        "{host} is {kind}: a webhook URL the model gave may not reach this machine or its networks (delivery.webhook.allowPrivateNetwork allows it)"
    )]
    Private { host: String, kind: &'static str },
    #[error(
        "{host} resolves to {address}, {kind}: a webhook URL the model gave may not reach this machine or its networks (delivery.webhook.allowPrivateNetwork allows it)"
    )]
    Resolved {
        host: String,
        address: IpAddr,
        kind: &'static str,
    },
}

/// Whether almanac may post to `url`, given where it came from and whether
/// private networks are allowed; the parsed URL when it may. A host name
/// other than `localhost` passes here and is checked when resolved (see
/// the module doc).
pub(crate) fn check_url(
    url: &str,
    origin: UrlOrigin,
    allow_private: bool,
) -> Result<reqwest::Url, UrlRefused> {
    let parsed = reqwest::Url::parse(url.trim()).map_err(|_| UrlRefused::NotAUrl(url.into()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(UrlRefused::Scheme(parsed.scheme().to_string()));
    }
    let host = parsed
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or(UrlRefused::NoHost)?;
    if origin == UrlOrigin::Config || allow_private {
        return Ok(parsed);
    }
    let refused = |kind| UrlRefused::Private {
        host: host.to_string(),
        kind,
    };
    // The parser has already turned every spelling of an address into
    // its usual form (`http://2130706433/` is 127.0.0.1).
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = bare.parse::<IpAddr>() {
        return match non_public(ip) {
            Some(kind) => Err(refused(kind)),
            None => Ok(parsed),
        };
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name == "localhost" || name.ends_with(".localhost") {
        return Err(refused("a loopback name"));
    }
    Ok(parsed)
}

/// What kind of non-public address `ip` is; `None` for a public one.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, ..] = ip.octets();
    Some(match (a, b) {
        (0, _) => "an unspecified address",
        (127, _) => "a loopback address",
        (10, _) | (172, 16..=31) | (192, 168) => "a private address",
        (169, 254) => "a link-local address",
        (100, 64..=127) => "a shared (CGNAT) address",
        (224..=239, _) => "a multicast address",
        (240..=255, _) => "a reserved address",
        _ => return None,
    })
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    if ip.is_unspecified() {
        return Some("an unspecified address");
    }
    if ip.is_loopback() {
        return Some("a loopback address");
    }
    if let Some(v4) = embedded_v4(ip) {
        return non_public_v4(v4);
    }
    let first = ip.segments()[0];
    Some(match first {
        0xfe80..=0xfebf => "a link-local address",
        0xfec0..=0xfeff => "a site-local address",
        0xfc00..=0xfdff => "a unique-local address",
        0xff00..=0xffff => "a multicast address",
        _ => return None,
    })
}

/// The IPv4 address an IPv6 one carries: mapped (`::ffff:a.b.c.d`),
/// compatible (`::a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`) or 6to4
/// (`2002:aabb:ccdd::`).
fn embedded_v4(ip: Ipv6Addr) -> Option<Ipv4Addr> {
    let s = ip.segments();
    let low = || Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0, 0, _, _] => Some(low()),
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] => Some(low()),
        [0x2002, hi, lo, ..] => Some(Ipv4Addr::new(
            (hi >> 8) as u8,
            hi as u8,
            (lo >> 8) as u8,
            lo as u8,
        )),
        _ => None,
    }
}

/// The resolver of the client that posts to URLs the model gave: a name
/// resolves only when every address it has is public, and the client
/// connects to exactly the addresses checked.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct GuardedResolver;

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let addresses = resolve_public(&host).await?;
            Ok(Box::new(addresses.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// The addresses of `host`, refused when any of them is not public.
pub(crate) async fn resolve_public(
    host: &str,
) -> Result<Vec<SocketAddr>, Box<dyn std::error::Error + Send + Sync>> {
    let addresses: Vec<SocketAddr> = tokio::net::lookup_host((host, 0)).await?.collect();
    if let Some((address, kind)) = addresses
        .iter()
        .find_map(|a| non_public(a.ip()).map(|kind| (a.ip(), kind)))
    {
        return Err(Box::new(UrlRefused::Resolved {
            host: host.to_string(),
            address,
            kind,
        }));
    }
    if addresses.is_empty() {
        return Err(format!("{host} has no address").into());
    }
    Ok(addresses)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_urls_may_not_reach_this_machine_or_its_networks() {
        use UrlOrigin::{Config, Model};
        // (url, origin, allowPrivateNetwork, allowed)
        let cases: &[(&str, UrlOrigin, bool, bool)] = &[
            ("https://hooks.example.com/in", Model, false, true),
            ("http://93.184.216.34/hook", Model, false, true),
            ("http://[2606:4700::1111]/hook", Model, false, true),
            ("http://8.8.8.8:8080/", Model, false, true),
            ("http://127.0.0.1:8080/hook", Model, false, false),
            ("http://127.9.9.9/", Model, false, false),
            ("http://localhost:9000/", Model, false, false),
            ("http://LOCALHOST./", Model, false, false),
            ("http://api.localhost/", Model, false, false),
            ("http://10.1.2.3/", Model, false, false),
            ("http://172.16.0.1/", Model, false, false),
            ("http://172.31.255.255/", Model, false, false),
            ("http://172.32.0.1/", Model, false, true),
            ("http://192.168.1.10/", Model, false, false),
            (
                "http://169.254.169.254/latest/meta-data/",
                Model,
                false,
                false,
            ),
            ("http://100.64.0.1/", Model, false, false),
            ("http://100.127.255.254/", Model, false, false),
            ("http://100.128.0.1/", Model, false, true),
            ("http://0.0.0.0/", Model, false, false),
            ("http://224.0.0.1/", Model, false, false),
            ("http://[::1]/", Model, false, false),
            ("http://[::]/", Model, false, false),
            ("http://[fe80::1]/", Model, false, false),
            ("http://[fc00::1]/", Model, false, false),
            ("http://[fd12:3456::1]/", Model, false, false),
            ("http://[::ffff:127.0.0.1]/", Model, false, false),
            ("http://[::ffff:10.0.0.1]/", Model, false, false),
            ("http://[::ffff:8.8.8.8]/", Model, false, true),
            ("http://[64:ff9b::a9fe:a9fe]/", Model, false, false),
            ("http://[2002:c0a8:0101::1]/", Model, false, false),
            // The URL parser normalises other spellings of an address.
            ("http://2130706433/", Model, false, false),
            ("http://0x7f.1/", Model, false, false),
            // The switch lets the model's URLs reach private networks.
            ("http://127.0.0.1:8080/hook", Model, true, true),
            ("http://[fc00::1]/", Model, true, true),
            ("http://localhost/", Model, true, true),
            // The user's own URLs go where they say.
            ("http://127.0.0.1:8080/hook", Config, false, true),
            ("http://192.168.1.10/", Config, false, true),
            // Only http and https, whoever gave them.
            ("ftp://example.com/file", Model, false, false),
            ("ftp://example.com/file", Config, false, false),
            ("file:///etc/passwd", Config, true, false),
            ("javascript:alert(1)", Config, false, false),
            ("not a url", Config, false, false),
        ];
        let mut wrong = Vec::new();
        for (url, origin, allow, allowed) in cases {
            let got = check_url(url, *origin, *allow);
            if got.is_ok() != *allowed {
                wrong.push(format!("{url} ({origin:?}, allow={allow}): {got:?}"));
            }
        }
        assert!(wrong.is_empty(), "wrong answers:\n{}", wrong.join("\n"));
        let err = check_url("http://10.0.0.7/x", UrlOrigin::Model, false).unwrap_err();
        assert_eq!(
            err,
            UrlRefused::Private {
                host: "10.0.0.7".into(),
                kind: "a private address"
            }
        );
        assert!(
            err.to_string()
                .contains("delivery.webhook.allowPrivateNetwork"),
            "{err}"
        );
        assert!(matches!(
            check_url("ftp://x.org/", UrlOrigin::Config, false),
            Err(UrlRefused::Scheme(s)) if s == "ftp"
        ));
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_when_resolved() {
        // `localhost` comes from the hosts file: no DNS query leaves the machine.
        let err = resolve_public("localhost").await.unwrap_err();
        let refused = err
            .downcast_ref::<UrlRefused>()
            .unwrap_or_else(|| panic!("not a refusal: {err}"));
        assert!(
            matches!(
                refused,
                UrlRefused::Resolved {
                    kind: "a loopback address",
                    ..
                }
            ),
            "{refused:?}"
        );
    }
}
