//! The OpenAPI 3.1 document of the REST API, built from the endpoints the route table hands
//! it (so it cannot drift, and knows nothing of routing).

use serde_json::{json, Map, Value};

/// What the document says of one endpoint.
pub(super) struct Endpoint {
    pub method: &'static str,
    /// Path segments in braces are path parameters.
    pub path: &'static str,
    pub summary: &'static str,
    /// Query parameters: name and description.
    pub query: &'static [(&'static str, &'static str)],
}

/// The document; `host` (the request's Host header) names the server URL.
pub(super) fn document(host: Option<&str>, endpoints: &[Endpoint]) -> Value {
    let mut paths = Map::new();
    for route in endpoints {
        let path = route.path.to_owned();
        let method = route.method.to_ascii_lowercase();
        let mut parameters: Vec<Value> = path
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .map(|name| json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}}))
            .collect();
        for (name, description) in route.query {
            parameters.push(json!({
                "name": name, "in": "query", "required": false,
                "description": description, "schema": {"type": "string"},
            }));
        }
        let op_id = format!(
            "{method}_{}",
            path.trim_matches('/')
                .replace(['/', '-', '.'], "_")
                .replace(['{', '}'], "")
        );
        // Every answer is JSON but the browser debug client's script.
        let success = if path.ends_with(".js") {
            json!({"application/javascript": {"schema": {"type": "string"}}})
        } else {
            json!({"application/json": {"schema": {"type": "object"}}})
        };
        let mut op = json!({
            "summary": route.summary,
            "operationId": op_id,
            "parameters": parameters,
            "responses": {
                "200": {"description": "Success", "content": success},
                "default": {
                    "description": "Error: {\"error\": code, \"message\"?: text}",
                    "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
                },
            },
        });
        if method == "post" {
            op["requestBody"] = json!({
                "required": false,
                "content": {"application/json": {"schema": {"type": "object"}}},
            });
        }
        let entry = paths.entry(path).or_insert_with(|| json!({}));
        entry[method] = op;
    }
    let server = format!("http://{}", host.unwrap_or("127.0.0.1:5174"));
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "CID el Dill Breakpoint Server API",
            "version": "1.0.0",
            "description": "Breakpoint server for programs instrumented with the CID el Dill client.",
        },
        "servers": [{"url": server}],
        "paths": paths,
        "components": {"schemas": {"Error": {
            "type": "object",
            "required": ["error"],
            "properties": {"error": {"type": "string"}, "message": {"type": "string"}},
        }}},
    })
}
