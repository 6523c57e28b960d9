//! Unit tests of `crate::upstream::auth`.

use super::*;

#[test]
fn challenges_are_parsed() {
    let c = parse_challenge(
        r#"Bearer error="invalid_token", resource_metadata="https://h/.well-known/oauth-protected-resource/mcp", scope="read write""#,
    )
    .unwrap();
    assert_eq!(c.error.as_deref(), Some("invalid_token"));
    assert_eq!(
        c.resource_metadata.as_deref(),
        Some("https://h/.well-known/oauth-protected-resource/mcp")
    );
    assert_eq!(c.scope.as_deref(), Some("read write"));
    // Another scheme first, a token value, an escaped quote, any case.
    let c = parse_challenge(
        r#"Basic realm="a, b", bearer scope=files:read, error_description="say \"hi\"""#,
    )
    .unwrap();
    assert_eq!(c.scope.as_deref(), Some("files:read"));
    assert_eq!(c.error_description.as_deref(), Some("say \"hi\""));
    assert_eq!(c.resource_metadata, None);
    assert_eq!(parse_challenge(r#"Basic realm="x""#), None);
    assert_eq!(parse_challenge("Bearer"), Some(Challenge::default()));
    assert_eq!(parse_challenge(""), None);
}

#[test]
fn metadata_urls_follow_the_specification_order() {
    assert_eq!(
        resource_metadata_urls("https://h:8443/public/mcp?x=1"),
        [
            "https://h:8443/.well-known/oauth-protected-resource/public/mcp",
            "https://h:8443/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(
        resource_metadata_urls("http://h/"),
        ["http://h/.well-known/oauth-protected-resource"]
    );
    assert_eq!(
        server_metadata_urls("https://auth.example.com/tenant1"),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
            "https://auth.example.com/.well-known/openid-configuration/tenant1",
            "https://auth.example.com/tenant1/.well-known/openid-configuration"
        ]
    );
    assert_eq!(
        server_metadata_urls("https://auth.example.com/"),
        [
            "https://auth.example.com/.well-known/oauth-authorization-server",
            "https://auth.example.com/.well-known/openid-configuration"
        ]
    );
    assert!(server_metadata_urls("not a url").is_empty());
}

#[test]
fn resources_are_canonical_and_cover_their_paths() {
    assert_eq!(
        canonical_resource("HTTPS://MCP.Example.com/mcp/#frag"),
        "https://mcp.example.com/mcp"
    );
    assert_eq!(canonical_resource("https://h/"), "https://h");
    assert!(resource_covers("https://h/mcp", "https://h/mcp"));
    assert!(resource_covers("https://h", "https://h/mcp"));
    assert!(resource_covers("https://h/", "https://h/a/mcp"));
    assert!(!resource_covers("https://h/mcpx", "https://h/mcp"));
    assert!(!resource_covers("https://other/mcp", "https://h/mcp"));
    assert!(!resource_covers("https://h/mcp/deeper", "https://h/mcp"));
}

#[test]
fn pkce_uses_s256() {
    // RFC 7636 Appendix B.
    let p = Pkce::from_verifier("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk".to_owned());
    assert_eq!(p.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    let a = Pkce::new();
    assert_eq!(a.verifier.len(), 64);
    assert_ne!(a.verifier, Pkce::new().verifier);
}

#[test]
fn authorization_urls_encode_their_values() {
    let u = with_query(
        "https://as/authorize",
        &[
            ("redirect_uri", "http://127.0.0.1:5/oauth/callback"),
            ("scope", "a b"),
        ],
    );
    assert_eq!(
        u,
        "https://as/authorize?redirect_uri=http%3A%2F%2F127.0.0.1%3A5%2Foauth%2Fcallback&scope=a%20b"
    );
    assert_eq!(
        with_query("https://as/a?x=1", &[("k", "v")]),
        "https://as/a?x=1&k=v"
    );
}

#[test]
fn token_responses_are_read() {
    let t = parse_token_response(
        200,
        r#"{"access_token":"at","token_type":"bearer","expires_in":60,"refresh_token":"rt","scope":"a b"}"#,
        1000.0,
        None,
    )
    .unwrap();
    assert_eq!(t.access_token, "at");
    assert_eq!(t.expires_at, Some(1060.0));
    assert_eq!(t.refresh_token.as_deref(), Some("rt"));
    assert!(!t.expired(1000.0) && t.expired(1055.0));
    // A refresh without a new refresh token keeps the old one.
    let t = parse_token_response(
        200,
        r#"{"access_token":"n","token_type":"Bearer"}"#,
        0.0,
        Some("old"),
    )
    .unwrap();
    assert_eq!(t.refresh_token.as_deref(), Some("old"));
    assert_eq!(t.expires_at, None);
    let e = parse_token_response(
        400,
        r#"{"error":"invalid_grant","error_description":"bad code"}"#,
        0.0,
        None,
    )
    .unwrap_err();
    assert!(e.contains("invalid_grant: bad code"), "{e}");
    assert!(parse_token_response(200, "<html>", 0.0, None)
        .unwrap_err()
        .contains("not JSON"));
    assert!(parse_token_response(200, r#"{"token_type":"Bearer"}"#, 0.0, None).is_err());
    assert!(parse_token_response(
        200,
        r#"{"access_token":"x","token_type":"DPoP"}"#,
        0.0,
        None
    )
    .unwrap_err()
    .contains("DPoP"));
    assert!(parse_token_response(200, "{\"access_token\":\"a\\nb\"}", 0.0, None).is_err());
}

#[test]
fn a_loopback_redirect_registers_a_native_application_and_any_other_a_web_one() {
    for uri in [
        "http://127.0.0.1:5174/oauth/callback",
        "http://localhost:8080/oauth/callback",
        "http://[::1]:9/oauth/callback",
        "http://127.0.0.2/oauth/callback?x=1",
    ] {
        assert_eq!(application_type(uri), "native", "{uri}");
    }
    for uri in [
        "https://debug.example.com/oauth/callback",
        "http://192.168.1.5:5174/oauth/callback",
        "http://localhost.example.com/cb",
    ] {
        assert_eq!(application_type(uri), "web", "{uri}");
    }
}
