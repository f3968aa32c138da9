//! `GET /c/{id}`: the campaign's page for shoppers, and `GET /static/{file}`: what it
//! loads. Plain files built into the binary, each with a strong ETag (SHA-256 of its
//! bytes) and a `Cache-Control` a CDN can follow; a matching `If-None-Match` gets 304.
//! The page is the same for every campaign: it reads the id from its address.
//! `GET /api/openapi.json` (the API's description) is served the same way.

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CACHE_CONTROL, CONTENT_TYPE, ETAG, IF_NONE_MATCH};
use hyper::{Request, Response, StatusCode};
use sha2::{Digest, Sha256};
use std::sync::OnceLock;

use crate::http::reply::ApiError;
use crate::http::reply::Reply;

struct Asset {
    body: &'static str,
    content_type: &'static str,
    cache: &'static str,
    etag: OnceLock<String>,
}

impl Asset {
    const fn new(body: &'static str, content_type: &'static str, cache: &'static str) -> Self {
        Asset {
            body,
            content_type,
            cache,
            etag: OnceLock::new(),
        }
    }

    fn etag(&self) -> &str {
        self.etag.get_or_init(|| {
            let hash = Sha256::digest(self.body.as_bytes());
            let hex: String = hash[..12].iter().map(|b| format!("{b:02x}")).collect();
            format!("\"{hex}\"")
        })
    }

    fn serve(&self, req: &Request<Incoming>) -> Reply {
        let etag = self.etag();
        let fresh = req
            .headers()
            .get(IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == etag || t.trim() == "*"));
        let mut r = if fresh {
            let mut r = Response::new(Full::new(Bytes::new()));
            *r.status_mut() = StatusCode::NOT_MODIFIED;
            r
        } else {
            let mut r = Response::new(Full::new(Bytes::from_static(self.body.as_bytes())));
            r.headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(self.content_type));
            r
        };
        let h = r.headers_mut();
        h.insert(CACHE_CONTROL, HeaderValue::from_static(self.cache));
        if let Ok(v) = HeaderValue::from_str(etag) {
            h.insert(ETAG, v);
        }
        r
    }
}

/// Pages and files revalidate after a few minutes; a new release changes their ETags.
static PAGE: Asset = Asset::new(
    include_str!("../../../static/campaign.html"),
    "text/html; charset=utf-8",
    "public, max-age=60",
);
static SCRIPT: Asset = Asset::new(
    include_str!("../../../static/app.js"),
    "text/javascript; charset=utf-8",
    "public, max-age=300",
);
static STYLE: Asset = Asset::new(
    include_str!("../../../static/app.css"),
    "text/css; charset=utf-8",
    "public, max-age=300",
);

/// The API's description, as committed (a test keeps it equal to what the types make).
static DESCRIPTION: Asset = Asset::new(
    include_str!("../../../../docs/openapi.json"),
    "application/json",
    "public, max-age=300",
);

pub fn page(id: &str, req: &Request<Incoming>) -> Result<Reply, ApiError> {
    if !seckill_core::campaign::valid_id(id) {
        return Err(ApiError::UnknownCampaign);
    }
    Ok(PAGE.serve(req))
}

pub fn asset(name: &str, req: &Request<Incoming>) -> Result<Reply, ApiError> {
    match name {
        "app.js" => Ok(SCRIPT.serve(req)),
        "app.css" => Ok(STYLE.serve(req)),
        _ => Err(ApiError::NotFound),
    }
}

pub fn description(req: &Request<Incoming>) -> Reply {
    DESCRIPTION.serve(req)
}
