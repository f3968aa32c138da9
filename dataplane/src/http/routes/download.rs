//! `GET /dl/{token}`: the campaign's file, for a valid signed link only — 403 for a bad
//! signature, 410 once it has expired. Read with glommio's own file I/O.

use bytes::Bytes;
use glommio::io::BufferedFile;
use http_body_util::Full;
use hyper::header::{HeaderValue, CONTENT_DISPOSITION, CONTENT_TYPE};
use hyper::Response;

use crate::http::reply::ApiError;
use crate::http::reply::Reply;
use crate::shard::Shard;
use seckill_core::auth::{self, TokenError};
use seckill_core::keys::OrderId;

pub async fn get(shard: &Shard, token: &str) -> Result<Reply, ApiError> {
    let order_id = auth::verify_download(
        shard.settings().keys.downloads(),
        token,
        seckill_core::now_ms(),
    )
    .map_err(|e| match e {
        TokenError::Expired => ApiError::LinkExpired,
        _ => ApiError::LinkInvalid,
    })?;
    let order = OrderId::parse(&order_id).ok_or(ApiError::LinkInvalid)?;
    let name = shard
        .with_campaign(order.campaign, |v| v.campaign.spec.content_file.clone())
        .flatten()
        .ok_or(ApiError::NotFound)?;
    let path = shard.settings().content_dir.join(&name);
    let bytes = read(&path).await.map_err(|e| {
        tracing::error!(path = %path.display(), error = %e, "cannot read content file");
        ApiError::NotFound
    })?;
    let mut r = Response::new(Full::new(bytes));
    let h = r.headers_mut();
    h.insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/octet-stream"),
    );
    if let Ok(v) = HeaderValue::from_str(&format!("attachment; filename=\"{name}\"")) {
        h.insert(CONTENT_DISPOSITION, v);
    }
    Ok(r)
}

async fn read(path: &std::path::Path) -> glommio::Result<Bytes, ()> {
    let file = BufferedFile::open(path).await?;
    let size = file.file_size().await?;
    let data = file.read_at(0, size as usize).await?;
    let bytes = Bytes::copy_from_slice(&data);
    file.close().await?;
    Ok(bytes)
}
