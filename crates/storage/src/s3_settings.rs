//! Checks of an S3 graph's settings before a client is built from them: a key that no
//! layer reads is named (Lance would drop it silently, so a typo looks like a store that
//! ignores you), and a plain-http endpoint without `allow_http` is refused with the fix
//! (the HTTP client itself only says "builder error", at the first request).

use std::collections::BTreeMap;
use std::str::FromStr;

use object_store::aws::AmazonS3ConfigKey;
use object_store::ClientConfigKey;

/// Settings Lance reads itself, beside object_store's S3 and HTTP-client keys.
const LANCE_KEYS: [&str; 9] = [
    "s3_express",
    "block_size",
    "download_retry_count",
    "client_max_retries",
    "client_retry_timeout",
    "use_opendal",
    "expires_at_millis",
    "refresh_offset_millis",
    "aws_provider_scheme",
];

/// Prefixes of families of keys Lance reads (`headers.<name>`, `base_<key>`).
const LANCE_PREFIXES: [&str; 2] = ["headers.", "base_"];

/// The keys of `settings` that neither object_store's S3 store, its HTTP client nor Lance
/// reads.
pub(crate) fn unknown_keys(settings: &BTreeMap<String, String>) -> Vec<&str> {
    settings
        .keys()
        .map(String::as_str)
        .filter(|key| {
            let lower = key.to_ascii_lowercase();
            AmazonS3ConfigKey::from_str(&lower).is_err()
                && ClientConfigKey::from_str(&lower).is_err()
                && !LANCE_KEYS.contains(&lower.as_str())
                && !LANCE_PREFIXES
                    .iter()
                    .any(|prefix| lower.starts_with(prefix))
        })
        .collect()
}

/// Lance's reading of a yes.
fn truthy(value: &str) -> bool {
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "on" | "yes" | "y"
    )
}

/// The endpoint, when it is plain http and nothing allows http: from `settings`, or else
/// the `AWS_*` environment `env` reads (as the S3 client fills what settings leave out).
pub(crate) fn plain_http_endpoint(
    settings: &BTreeMap<String, String>,
    env: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    // As Lance picks it: the S3-specific endpoint before the general one.
    let setting = |wanted: AmazonS3ConfigKey| {
        settings
            .iter()
            .find(|(key, _)| {
                AmazonS3ConfigKey::from_str(&key.to_ascii_lowercase()).ok() == Some(wanted)
            })
            .map(|(_, value)| value.clone())
    };
    let endpoint = setting(AmazonS3ConfigKey::S3Endpoint)
        .or_else(|| setting(AmazonS3ConfigKey::Endpoint))
        .or_else(|| env("AWS_ENDPOINT_URL_S3"))
        .or_else(|| env("AWS_ENDPOINT_URL"))
        .or_else(|| env("AWS_ENDPOINT"))?;
    // Lance allows http when any setting naming allow_http says yes.
    let allowed = settings
        .iter()
        .any(|(key, value)| key.to_ascii_lowercase().contains("allow_http") && truthy(value))
        || env("AWS_ALLOW_HTTP").is_some_and(|value| truthy(&value));
    (endpoint.to_ascii_lowercase().starts_with("http://") && !allowed).then_some(endpoint)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn keys_no_layer_reads_are_named_and_known_ones_are_not() {
        let given = settings(&[
            ("aws_endpoint", "x"),
            ("endpoint", "x"),
            ("AWS_REGION", "x"),
            ("aws_access_key_id", "x"),
            ("allow_http", "true"),
            ("timeout", "5s"),
            ("client_max_retries", "3"),
            ("headers.x-amz-meta", "v"),
            ("aws_endpiont", "typo"),
            ("regoin", "typo"),
        ]);
        assert_eq!(unknown_keys(&given), vec!["aws_endpiont", "regoin"]);
    }

    #[test]
    fn a_plain_http_endpoint_needs_allow_http() {
        let none = |_: &str| None;
        let http = settings(&[("aws_endpoint", "http://127.0.0.1:9000")]);
        assert_eq!(
            plain_http_endpoint(&http, none).as_deref(),
            Some("http://127.0.0.1:9000")
        );
        let mut allowed = http.clone();
        allowed.insert("allow_http".into(), "true".into());
        assert_eq!(plain_http_endpoint(&allowed, none), None);
        let env_allows = |key: &str| (key == "AWS_ALLOW_HTTP").then(|| "1".to_owned());
        assert_eq!(plain_http_endpoint(&http, env_allows), None);
        let https = settings(&[("endpoint", "https://s3.example.com")]);
        assert_eq!(plain_http_endpoint(&https, none), None);
        // The S3-specific endpoint wins, as in Lance.
        let both = settings(&[
            ("aws_endpoint", "http://h:1"),
            ("aws_endpoint_url_s3", "https://s3.example.com"),
        ]);
        assert_eq!(plain_http_endpoint(&both, none), None);
        let env_http = |key: &str| (key == "AWS_ENDPOINT").then(|| "http://h:1".to_owned());
        assert_eq!(
            plain_http_endpoint(&BTreeMap::new(), env_http).as_deref(),
            Some("http://h:1")
        );
        assert_eq!(plain_http_endpoint(&BTreeMap::new(), none), None);
    }
}
