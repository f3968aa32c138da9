//! What every answer is counted by: the endpoint it reached and its outcome. Each is an
//! enum that carries its name, its place in the metrics' tables and (an outcome) its HTTP
//! status, so a new route or refusal cannot be left out of a table or counted as another.

use hyper::StatusCode;

/// The route an answer came from, as the metrics and the fleet's telemetry name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Endpoint {
    Time,
    Session,
    Campaigns,
    Campaign,
    Purchase,
    Challenge,
    Ticket,
    Order,
    Pay,
    Download,
    Events,
    Page,
    Asset,
    Queue,
    /// The payment provider's webhooks.
    PaymentWebhook,
    /// A path that is no route.
    Other,
}

impl Endpoint {
    /// Every endpoint, in the order of their indices.
    pub const ALL: [Endpoint; 16] = [
        Endpoint::Time,
        Endpoint::Session,
        Endpoint::Campaigns,
        Endpoint::Campaign,
        Endpoint::Purchase,
        Endpoint::Challenge,
        Endpoint::Ticket,
        Endpoint::Order,
        Endpoint::Pay,
        Endpoint::Download,
        Endpoint::Events,
        Endpoint::Page,
        Endpoint::Asset,
        Endpoint::Queue,
        Endpoint::PaymentWebhook,
        Endpoint::Other,
    ];

    /// The endpoint's place in the metrics' tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    pub const fn name(self) -> &'static str {
        match self {
            Endpoint::Time => "time",
            Endpoint::Session => "session",
            Endpoint::Campaigns => "campaigns",
            Endpoint::Campaign => "campaign",
            Endpoint::Purchase => "purchase",
            Endpoint::Challenge => "challenge",
            Endpoint::Ticket => "ticket",
            Endpoint::Order => "order",
            Endpoint::Pay => "pay",
            Endpoint::Download => "download",
            Endpoint::Events => "events",
            Endpoint::Page => "page",
            Endpoint::Asset => "asset",
            Endpoint::Queue => "queue",
            Endpoint::PaymentWebhook => "payment_webhook",
            Endpoint::Other => "other",
        }
    }
}

/// How a request was answered: `ok`, or the error code its JSON body carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Outcome {
    Ok,
    BadRequest,
    HeadersTooLarge,
    PayloadTooLarge,
    Timeout,
    Unauthenticated,
    NotFound,
    UnknownCampaign,
    MethodNotAllowed,
    SoldOut,
    NotEnoughStock,
    LimitReached,
    Paused,
    NotStarted,
    Ended,
    Expired,
    LinkInvalid,
    LinkExpired,
    Unavailable,
    Busy,
    RateLimited,
    Blocked,
    TicketInvalid,
    ChallengeInvalid,
    TicketsExhausted,
    NoTickets,
    TooManyStreams,
    Starting,
    NoQueue,
    Forbidden,
    /// A webhook whose signature does not verify.
    InvalidSignature,
}

impl Outcome {
    /// Every outcome, in the order of their indices.
    pub const ALL: [Outcome; 31] = [
        Outcome::Ok,
        Outcome::BadRequest,
        Outcome::HeadersTooLarge,
        Outcome::PayloadTooLarge,
        Outcome::Timeout,
        Outcome::Unauthenticated,
        Outcome::NotFound,
        Outcome::UnknownCampaign,
        Outcome::MethodNotAllowed,
        Outcome::SoldOut,
        Outcome::NotEnoughStock,
        Outcome::LimitReached,
        Outcome::Paused,
        Outcome::NotStarted,
        Outcome::Ended,
        Outcome::Expired,
        Outcome::LinkInvalid,
        Outcome::LinkExpired,
        Outcome::Unavailable,
        Outcome::Busy,
        Outcome::RateLimited,
        Outcome::Blocked,
        Outcome::TicketInvalid,
        Outcome::ChallengeInvalid,
        Outcome::TicketsExhausted,
        Outcome::NoTickets,
        Outcome::TooManyStreams,
        Outcome::Starting,
        Outcome::NoQueue,
        Outcome::Forbidden,
        Outcome::InvalidSignature,
    ];

    /// The outcome's place in the metrics' tables.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// `ok`, or the `error` of the answer's JSON body.
    pub const fn code(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::BadRequest => "bad_request",
            Outcome::HeadersTooLarge => "headers_too_large",
            Outcome::PayloadTooLarge => "payload_too_large",
            Outcome::Timeout => "timeout",
            Outcome::Unauthenticated => "unauthenticated",
            Outcome::NotFound => "not_found",
            Outcome::UnknownCampaign => "unknown_campaign",
            Outcome::MethodNotAllowed => "method_not_allowed",
            Outcome::SoldOut => "sold_out",
            Outcome::NotEnoughStock => "not_enough_stock",
            Outcome::LimitReached => "limit_reached",
            Outcome::Paused => "paused",
            Outcome::NotStarted => "not_started",
            Outcome::Ended => "ended",
            Outcome::Expired => "expired",
            Outcome::LinkInvalid => "link_invalid",
            Outcome::LinkExpired => "link_expired",
            Outcome::Unavailable => "unavailable",
            Outcome::Busy => "busy",
            Outcome::RateLimited => "rate_limited",
            Outcome::Blocked => "blocked",
            Outcome::TicketInvalid => "ticket_invalid",
            Outcome::ChallengeInvalid => "challenge_invalid",
            Outcome::TicketsExhausted => "tickets_exhausted",
            Outcome::NoTickets => "no_tickets",
            Outcome::TooManyStreams => "too_many_streams",
            Outcome::Starting => "starting",
            Outcome::NoQueue => "no_queue",
            Outcome::Forbidden => "forbidden",
            Outcome::InvalidSignature => "invalid_signature",
        }
    }

    pub const fn status(self) -> StatusCode {
        match self {
            Outcome::Ok => StatusCode::OK,
            Outcome::BadRequest => StatusCode::BAD_REQUEST,
            Outcome::HeadersTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            Outcome::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
            Outcome::Timeout => StatusCode::REQUEST_TIMEOUT,
            Outcome::Unauthenticated | Outcome::InvalidSignature => StatusCode::UNAUTHORIZED,
            Outcome::NotFound
            | Outcome::UnknownCampaign
            | Outcome::NoTickets
            | Outcome::NoQueue => StatusCode::NOT_FOUND,
            Outcome::MethodNotAllowed => StatusCode::METHOD_NOT_ALLOWED,
            Outcome::SoldOut
            | Outcome::NotEnoughStock
            | Outcome::LimitReached
            | Outcome::Paused
            | Outcome::TicketsExhausted => StatusCode::CONFLICT,
            Outcome::NotStarted => StatusCode::TOO_EARLY,
            Outcome::Ended | Outcome::Expired | Outcome::LinkExpired => StatusCode::GONE,
            Outcome::LinkInvalid
            | Outcome::Blocked
            | Outcome::TicketInvalid
            | Outcome::ChallengeInvalid
            | Outcome::Forbidden => StatusCode::FORBIDDEN,
            Outcome::Unavailable | Outcome::Busy | Outcome::Starting => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            Outcome::RateLimited | Outcome::TooManyStreams => StatusCode::TOO_MANY_REQUESTS,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_variant_sits_at_its_index_under_a_name_of_its_own() {
        for (i, e) in Endpoint::ALL.iter().enumerate() {
            assert_eq!(e.index(), i, "{e:?}");
        }
        for (i, o) in Outcome::ALL.iter().enumerate() {
            assert_eq!(o.index(), i, "{o:?}");
        }
        let mut names: Vec<&str> = Endpoint::ALL.iter().map(|e| e.name()).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), Endpoint::ALL.len());
        let mut codes: Vec<&str> = Outcome::ALL.iter().map(|o| o.code()).collect();
        codes.sort_unstable();
        codes.dedup();
        assert_eq!(codes.len(), Outcome::ALL.len());
    }
}
