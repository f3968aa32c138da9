//! The OpenAPI 3.1 description of the shopper API and the admin listener, built from the
//! request and answer types: the schemas come from the types themselves (schemars), the
//! routes and their answers from the table below. `docs/openapi.json` is its output, and
//! a test keeps the two the same.

use schemars::generate::SchemaSettings;
use serde_json::{json, Map, Value};

use super::*;

/// What each documented refusal status means, for the descriptions.
fn meaning(status: u16) -> &'static str {
    match status {
        400 => "bad input: malformed JSON, unknown fields, a value out of range",
        401 => "no valid token: missing, malformed, forged, expired, not yet valid, of an unknown key, another issuer or audience, or living longer than allowed",
        403 => "refused: blocked, a missing or used ticket, a bad challenge or link, a proxied request to the demo issuer",
        404 => "no such route, campaign or order (another user's orders included)",
        405 => "the route takes another method",
        408 => "the body did not arrive in time",
        409 => "sold out, over the per-user limit, not enough stock, paused, or no ticket left",
        410 => "the sale has ended, the hold or the link expired",
        413 => "the body is over http.max_body_bytes",
        425 => "the sale (or its ticket window) has not opened yet",
        429 => "over a rate limit, or too many event streams from this address",
        503 => "Redis unavailable, over the admission rate, or the node is starting (Retry-After)",
        _ => "refused",
    }
}

fn reference(name: &str) -> Value {
    json!({ "$ref": format!("#/components/schemas/{name}") })
}

fn json_answer(description: &str, schema: Value) -> Value {
    json!({ "description": description, "content": { "application/json": { "schema": schema } } })
}

/// A route's answers: 200 with `ok`, and each refusal status with the error body.
fn answers(ok: Value, refusals: &[u16]) -> Value {
    let mut r = Map::new();
    r.insert("200".into(), ok);
    for s in refusals {
        r.insert(s.to_string(), json_answer(meaning(*s), reference("Error")));
    }
    Value::Object(r)
}

fn path_id(name: &str, description: &str) -> Value {
    json!({ "name": name, "in": "path", "required": true, "description": description,
            "schema": { "type": "string" } })
}

fn body(schema: &str) -> Value {
    json!({ "required": true, "content": { "application/json": { "schema": reference(schema) } } })
}

/// A body that may be left out: an empty one reads as `{}`.
fn optional_body(schema: &str) -> Value {
    json!({ "required": false, "content": { "application/json": { "schema": reference(schema) } } })
}

const BEARER: &[&str] = &["shopper"];

fn op(
    summary: &str,
    security: &[&str],
    params: Vec<Value>,
    body: Option<Value>,
    answers: Value,
) -> Value {
    let mut o = json!({ "summary": summary, "responses": answers });
    if !security.is_empty() {
        o["security"] = Value::Array(
            security
                .iter()
                .map(|s| json!({ s.to_string(): [] }))
                .collect(),
        );
    }
    if !params.is_empty() {
        o["parameters"] = Value::Array(params);
    }
    if let Some(b) = body {
        o["requestBody"] = b;
    }
    o
}

/// The schemas of every request and answer type, each under its name.
fn schemas() -> Map<String, Value> {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "/components/schemas".into())
        .into_generator();
    let add = |name: &str, schema: schemars::Schema, out: &mut Map<String, Value>| {
        out.insert(name.to_string(), schema.to_value());
    };
    let mut out = Map::new();
    add(
        "PurchaseBody",
        generator.root_schema_for::<PurchaseBody>(),
        &mut out,
    );
    add(
        "SessionBody",
        generator.root_schema_for::<SessionBody>(),
        &mut out,
    );
    add(
        "SolutionBody",
        generator.root_schema_for::<SolutionBody>(),
        &mut out,
    );
    add("Time", generator.root_schema_for::<Time>(), &mut out);
    add("Session", generator.root_schema_for::<Session>(), &mut out);
    add(
        "CampaignInfo",
        generator.root_schema_for::<CampaignInfo>(),
        &mut out,
    );
    add("Held", generator.root_schema_for::<Held>(), &mut out);
    add("Paid", generator.root_schema_for::<Paid>(), &mut out);
    add("Order", generator.root_schema_for::<Order>(), &mut out);
    add(
        "OrderList",
        generator.root_schema_for::<OrderList>(),
        &mut out,
    );
    add(
        "PaymentEvent",
        generator.root_schema_for::<PaymentEvent>(),
        &mut out,
    );
    add(
        "PaymentTaken",
        generator.root_schema_for::<PaymentTaken>(),
        &mut out,
    );
    add(
        "Challenge",
        generator.root_schema_for::<Challenge>(),
        &mut out,
    );
    add("Ticket", generator.root_schema_for::<Ticket>(), &mut out);
    add(
        "JoinBody",
        generator.root_schema_for::<JoinBody>(),
        &mut out,
    );
    add(
        "QueueStatus",
        generator.root_schema_for::<QueueStatus>(),
        &mut out,
    );
    add("Error", generator.root_schema_for::<Error>(), &mut out);
    // A type used inside another is defined once, beside the others.
    let mut nested = Map::new();
    for v in out.values_mut() {
        if let Some(o) = v.as_object_mut() {
            o.remove("$schema");
            if let Some(Value::Object(mut c)) = o.remove("components") {
                if let Some(Value::Object(defs)) = c.remove("schemas") {
                    nested.extend(defs);
                }
            }
        }
    }
    for (name, schema) in nested {
        out.entry(name).or_insert(schema);
    }
    out
}

/// The whole description.
pub fn openapi() -> Value {
    let id = || path_id("id", "the campaign's id");
    let order = || path_id("id", "the order's id: <campaign>.<partition>.<seq>");
    let idempotency = json!({ "name": "Idempotency-Key", "in": "header", "required": false,
        "description": "1-64 of letters, digits and _ - . : — a retry with the same key gets the first answer",
        "schema": { "type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$" } });
    let receipt = json!({ "name": "Queue-Receipt", "in": "header", "required": false,
        "description": "the receipt of an earlier answer", "schema": { "type": "string" } });
    let admin = json!([{ "url": "http://127.0.0.1:9090", "description": "the admin listener (admin.listen)" }]);
    let campaign_query = json!({ "name": "campaign", "in": "query", "required": false,
        "description": "only this campaign's orders", "schema": { "type": "string", "pattern": "^[a-z0-9_-]{1,32}$" } });
    let header = |name: &str, description: &str| {
        json!({ "name": name, "in": "header", "required": true,
        "description": description, "schema": { "type": "string" } })
    };
    let webhook_headers = vec![
        header("webhook-id", "the webhook's id: the same id again gets the first answer"),
        header("webhook-timestamp", "Unix seconds, within five minutes of the node's clock"),
        header("webhook-signature", "space-separated v1,<base64> (HMAC-SHA256) or v1a,<base64> (Ed25519) over id.timestamp.body"),
    ];
    let text = |description: &str, media: &str| json!({ "description": description, "content": { media: { "schema": { "type": "string" } } } });
    let status = json!({ "type": "object", "properties": {
        "status": { "type": "string" }, "reason": { "type": "string" } }, "required": ["status"] });
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "seckill",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "The flash-sale data plane's shopper API and admin listener. Every refusal is `{\"error\", \"message\"}` with the status named here; every answer carries `X-Request-Id`."
        },
        "servers": [{ "url": "http://127.0.0.1:8080", "description": "a node's listener (listen)" }],
        "paths": {
            "/api/time": { "get": op("The sale's clock (Redis's)", &[], vec![], None,
                answers(json_answer("now", reference("Time")), &[429])) },
            "/api/openapi.json": { "get": op("This description", &[], vec![], None,
                answers(json_answer("the OpenAPI description", json!({ "type": "object" })), &[429])) },
            "/api/session": { "post": op("A token for any user: the demo issuer, off unless demo_issuer is on (on loopback only; 403 to a request a proxy forwarded)", &[], vec![], Some(body("SessionBody")),
                answers(json_answer("a JWT signed with the demo issuer's key", reference("Session")), &[400, 403, 404, 408, 413, 429])) },
            "/api/campaigns": { "get": op("Every published campaign", &[], vec![], None,
                answers(json_answer("the campaigns", json!({ "type": "array", "items": reference("CampaignInfo") })), &[429, 503])) },
            "/api/campaigns/{id}": { "get": op("One campaign", &[], vec![id()], None,
                answers(json_answer("the campaign", reference("CampaignInfo")), &[404, 429, 503])) },
            "/api/campaigns/{id}/events": { "get": op("The campaign's state and stock as Server-Sent Events (`event: campaign`, data: a CampaignInfo)", &[], vec![id()], None,
                answers(json!({ "description": "the event stream: each event's data is the campaign as a CampaignInfo",
                    "content": { "text/event-stream": { "schema": { "type": "object", "properties": {
                        "event": { "const": "campaign" },
                        "data": { "type": "string", "contentMediaType": "application/json", "contentSchema": reference("CampaignInfo") },
                        "retry": { "type": "integer", "minimum": 0 } },
                        "required": ["event", "data"] } } } }), &[404, 429, 503])) },
            "/api/campaigns/{id}/purchase": { "post": op("Hold units: one script on the buyer's partition", BEARER, vec![id(), idempotency], Some(optional_body("PurchaseBody")),
                answers(json_answer("held", reference("Held")), &[400, 401, 403, 404, 408, 409, 410, 413, 425, 429, 503])) },
            "/api/campaigns/{id}/challenge": { "post": op("A proof-of-work challenge (campaigns with require_ticket)", BEARER, vec![id()], None,
                answers(json_answer("the challenge", reference("Challenge")), &[401, 403, 404, 410, 425, 429, 503])) },
            "/api/campaigns/{id}/ticket": { "post": op("A ticket for a solved challenge; the same live ticket to a user who holds one", BEARER, vec![id()], Some(body("SolutionBody")),
                answers(json_answer("the ticket", reference("Ticket")), &[400, 401, 403, 404, 408, 409, 410, 413, 425, 429, 503])) },
            "/api/campaigns/{id}/queue": {
                "post": op("Join the waiting room (again: the same place); with require_ticket, the body's ticket is the proof of work's", BEARER, vec![id()], Some(optional_body("JoinBody")),
                    answers(json_answer("the shopper's standing", reference("QueueStatus")), &[400, 401, 403, 404, 408, 413, 429, 503])),
                "get": op("The shopper's standing in the waiting room; with the last answer's receipt, answered without Redis until the shopper's turn", BEARER, vec![id(), receipt], None,
                    answers(json_answer("the shopper's standing", reference("QueueStatus")), &[401, 404, 429, 503])) },
            "/api/orders/{id}": { "get": op("An order, to its owner", BEARER, vec![order()], None,
                answers(json_answer("the order", reference("Order")), &[401, 403, 404, 429, 503])) },
            "/api/orders": { "get": op("The bearer's orders, newest first (at most 50)", BEARER, vec![campaign_query], None,
                answers(json_answer("the orders", reference("OrderList")), &[400, 401, 403, 429, 503])) },
            "/api/orders/{id}/pay": { "post": op("The demo payment provider (payments.provider = \"demo\", loopback only; 404 otherwise): the owner pays a held order through a webhook the node signs to itself; the same answer again on a repeat", BEARER, vec![order()], None,
                answers(json_answer("paid", reference("Paid")), &[401, 403, 404, 410, 429, 503])) },
            "/api/payments/webhook": { "post": op("The payment provider's events, verified as Standard Webhooks (v1 HMAC-SHA256 with a payments.webhook_secret_files secret, or v1a Ed25519) within five minutes; answered 2xx once the outcome is durable (503: retry)", &[], webhook_headers, Some(body("PaymentEvent")),
                answers(json_answer("what the event did", reference("PaymentTaken")), &[400, 401, 408, 413, 429, 503])) },
            "/dl/{token}": { "get": op("The campaign's file, for a signed download link", &[], vec![path_id("token", "the link's signed token")], None,
                answers(text("the file", "application/octet-stream"), &[403, 404, 410, 429, 503])) },
            "/c/{id}": { "get": op("The campaign's page for shoppers (any well-formed id: the page reads the campaign itself)", &[], vec![id()], None,
                answers(text("the page", "text/html"), &[404, 429])) },
            "/static/{name}": { "get": op("What the page loads", &[], vec![path_id("name", "app.js or app.css")], None,
                answers(text("the file", "text/javascript"), &[404, 429])) },
            "/healthz": { "servers": admin, "get": op("The process answers", &["admin"], vec![], None,
                answers(json_answer("ok", status.clone()), &[401])) },
            "/readyz": { "servers": admin, "get": op("Ready: every shard has Redis and the campaigns, the clock within bounds, not stopping", &["admin"], vec![], None,
                json!({ "200": json_answer("ready", status.clone()), "401": json_answer(meaning(401), reference("Error")),
                        "503": json_answer("not ready, and why", status) })) },
            "/metrics": { "servers": admin, "get": op("Prometheus text format", &["admin"], vec![], None,
                answers(text("the metrics", "text/plain"), &[401])) }
        },
        "components": {
            "schemas": schemas(),
            "securitySchemes": {
                "shopper": { "type": "http", "scheme": "bearer", "bearerFormat": "JWT",
                    "description": "the shop's JWT (EdDSA, ES256 or RS256; a kid of its JWKS): sub the user id, iss identity.issuer, aud identity.audience, exp within max_token_ttl_s" },
                "admin": { "type": "http", "scheme": "bearer",
                    "description": "admin.token; required beyond loopback" }
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `docs/openapi.json` is what [`openapi`] makes of the types:
    /// `SECKILL_WRITE_OPENAPI=1 cargo test -p seckill-core openapi` writes it anew.
    #[test]
    fn the_committed_openapi_description_is_the_one_the_types_make() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/openapi.json");
        let made = serde_json::to_string_pretty(&openapi()).expect("json") + "\n";
        if std::env::var_os("SECKILL_WRITE_OPENAPI").is_some() {
            std::fs::write(path, &made).expect("write docs/openapi.json");
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == made,
            "docs/openapi.json is stale: SECKILL_WRITE_OPENAPI=1 cargo test -p seckill-core openapi"
        );
    }

    #[test]
    fn every_reference_names_a_schema() {
        let doc = serde_json::to_string(&openapi()).expect("json");
        let schemas = openapi()["components"]["schemas"].clone();
        for part in doc.split("\"$ref\":\"#/components/schemas/").skip(1) {
            let name = part.split('"').next().unwrap_or_default();
            assert!(
                schemas.get(name).is_some(),
                "{name} is referenced but not defined"
            );
        }
    }

    #[test]
    fn answers_read_back_as_they_were_written() {
        let held = Held {
            order_id: "c.1.2".into(),
            status: "held".into(),
            pay_by_ms: 5,
        };
        let text = serde_json::to_vec(&held).expect("json");
        let glance = Glance::of(&text);
        assert_eq!(glance.order_id.as_deref(), Some("c.1.2"));
        let back: Held = serde_json::from_slice(&text).expect("held");
        assert_eq!(back.pay_by_ms, 5);
        let err = Error {
            error: "not_started".into(),
            message: "the sale has not started".into(),
            starts_at_ms: Some(9),
            remaining: None,
        };
        let v = serde_json::to_value(&err).expect("json");
        assert_eq!(v["starts_at_ms"], 9);
        assert!(v.get("remaining").is_none());
        assert!(Glance::of(b"not json").error.is_none());
    }
}
