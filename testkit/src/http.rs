//! HTTP as the tests speak it to a node: an agent that hands back every answer, and a
//! client on one keep-alive connection with the API's usual requests.

/// The tests' HTTP agent: every answer comes back as a response whatever its status (the
/// tests read the JSON of a 4xx), and no proxy is taken from the environment.
pub fn agent() -> ureq::Agent {
    agent_with(|c| c)
}

/// [`agent`] with more settings (timeouts, idle connections).
pub fn agent_with(
    f: impl FnOnce(
        ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
    ) -> ureq::config::ConfigBuilder<ureq::typestate::AgentScope>,
) -> ureq::Agent {
    f(ureq::Agent::config_builder()
        .http_status_as_error(false)
        .proxy(None))
    .build()
    .into()
}

/// The text of a GET that must answer 200 (metrics, with the admin token when given).
pub fn get_text(url: &str, token: Option<&str>) -> String {
    let mut req = agent().get(url);
    if let Some(t) = token {
        req = req.header("Authorization", &format!("Bearer {t}"));
    }
    let r = req.call().expect(url);
    assert_eq!(r.status(), 200, "{url}");
    body_text(r)
}

/// Whether `url` answers a GET below 400.
pub fn answers(url: &str) -> bool {
    agent()
        .get(url)
        .call()
        .is_ok_and(|r| r.status().as_u16() < 400)
}

/// The status of an answer, its body read to the end first: then the connection goes back
/// to the agent for its next request (an answer dropped unread closes it).
pub fn status_of(mut r: ureq::http::Response<ureq::Body>) -> u16 {
    let _ = std::io::copy(&mut r.body_mut().as_reader(), &mut std::io::sink());
    r.status().as_u16()
}

/// A body as text, empty when it cannot be read.
pub fn body_text(mut r: ureq::http::Response<ureq::Body>) -> String {
    r.body_mut().read_to_string().unwrap_or_default()
}

/// A body as JSON, `Null` when it is none.
pub fn body_json(mut r: ureq::http::Response<ureq::Body>) -> serde_json::Value {
    r.body_mut().read_json().unwrap_or_default()
}

/// A header of an answer, as text.
pub fn header<'a>(r: &'a ureq::http::Response<ureq::Body>, name: &str) -> Option<&'a str> {
    r.headers().get(name).and_then(|v| v.to_str().ok())
}

/// An HTTP client on one keep-alive connection.
pub struct Client {
    base: String,
    pub agent: ureq::Agent,
}

/// Status and JSON body of an answer.
pub type Answer = (u16, serde_json::Value);

pub(crate) fn answer(res: Result<ureq::http::Response<ureq::Body>, ureq::Error>) -> Answer {
    match res {
        Ok(r) => (r.status().as_u16(), body_json(r)),
        Err(e) => panic!("transport error: {e}"),
    }
}

impl Client {
    pub(crate) fn new(base: String, agent: ureq::Agent) -> Client {
        Client { base, agent }
    }

    /// The node's URL, for requests the helpers here do not make.
    pub fn base(&self) -> String {
        self.base.clone()
    }

    pub fn get(&self, path: &str, token: Option<&str>) -> Answer {
        let mut req = self.agent.get(&format!("{}{path}", self.base));
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        answer(req.call())
    }

    pub fn post(&self, path: &str, token: Option<&str>, body: &str) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Content-Type", "application/json");
        if let Some(t) = token {
            req = req.header("Authorization", &format!("Bearer {t}"));
        }
        answer(req.send(body))
    }

    /// A `POST` with these headers, as a webhook's sender makes one.
    pub fn post_with(&self, path: &str, headers: &[(String, String)], body: &str) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}{path}", self.base))
            .header("Content-Type", "application/json");
        for (k, v) in headers {
            req = req.header(k, v);
        }
        answer(req.send(body))
    }

    pub fn token(&self, user: &str) -> String {
        let (code, v) = self.post(
            "/api/session",
            None,
            &serde_json::json!({ "user_id": user }).to_string(),
        );
        assert_eq!(code, 200, "{v}");
        v["token"].as_str().expect("token").to_string()
    }

    pub fn pay(&self, order_id: &str, token: &str) -> Answer {
        self.post(&format!("/api/orders/{order_id}/pay"), Some(token), "")
    }

    pub fn purchase(&self, campaign: &str, token: &str, idem: Option<&str>) -> Answer {
        let mut req = self
            .agent
            .post(&format!("{}/api/campaigns/{campaign}/purchase", self.base))
            .header("Authorization", &format!("Bearer {token}"));
        if let Some(k) = idem {
            req = req.header("Idempotency-Key", k);
        }
        answer(req.send("{\"quantity\": 1}"))
    }
}
