//! Headless Chromium driven through chromedriver (WebDriver over HTTP): Debian's chromium
//! and chromedriver, a chromedriver of the test's own on a free port, and a fresh, empty
//! profile.

use serde_json::{json, Value};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::ports::free_port;
use crate::wait::wait_until;

/// The key of an element's reference in a WebDriver answer.
const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// A chromedriver and one browser session in it; both end when dropped.
pub struct Browser {
    driver: Child,
    base: String,
    session: String,
    http: ureq::Agent,
    profile: tempfile::TempDir,
}

impl Browser {
    /// A browser whose window is `width` × `height` pixels.
    pub fn start(width: u32, height: u32) -> Browser {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                Path::new(bin).exists(),
                "{bin} is missing: run `just setup` (it installs chromium and chromium-driver)"
            );
        }
        let port = free_port();
        let driver = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        // Every answer comes back whatever its status (a WebDriver error is JSON too).
        let http: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .proxy(None)
            .timeout_connect(Some(Duration::from_secs(5)))
            .timeout_global(Some(Duration::from_secs(60)))
            .build()
            .into();
        let base = format!("http://127.0.0.1:{port}");
        wait_until("chromedriver", Duration::from_secs(20), || {
            http.get(&format!("{base}/status"))
                .call()
                .is_ok_and(|r| r.status().as_u16() < 400)
        });
        let profile = tempfile::tempdir().expect("a profile directory");
        let caps = json!({ "capabilities": { "alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": CHROMIUM,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                         "--disable-background-networking", "--disable-component-update",
                         "--disable-sync", "--disable-dev-shm-usage",
                         format!("--window-size={width},{height}"),
                         format!("--user-data-dir={}", profile.path().display())]
            }
        }}});
        let session = http
            .post(&format!("{base}/session"))
            .send_json(caps)
            .map_err(|e| e.to_string())
            .and_then(|mut r| match r.status().as_u16() {
                400.. => Err(format!(
                    "{} {}",
                    r.status().as_u16(),
                    r.body_mut().read_to_string().unwrap_or_default()
                )),
                _ => r.body_mut().read_json::<Value>().map_err(|e| e.to_string()),
            });
        let mut browser = Browser {
            driver,
            base,
            session: String::new(),
            http,
            profile,
        };
        // Dropped on a failure from here on: the driver does not outlive the test.
        let v = session.unwrap_or_else(|e| panic!("a browser session: {e}"));
        browser.session = v["value"]["sessionId"]
            .as_str()
            .unwrap_or_else(|| panic!("no session id: {v}"))
            .to_string();
        browser
    }

    /// A WebDriver command of this session: a GET when `body` is `Null`, else a POST.
    fn call(&self, path: &str, body: Value) -> Value {
        let url = format!("{}/session/{}{path}", self.base, self.session);
        let res = match body {
            Value::Null => self.http.get(&url).call(),
            body => self.http.post(&url).send_json(body),
        };
        match res {
            Ok(mut r) if r.status().as_u16() < 400 => {
                r.body_mut().read_json::<Value>().expect("json")["value"].take()
            }
            Ok(mut r) => panic!(
                "webdriver {path}: {} {}",
                r.status().as_u16(),
                r.body_mut().read_to_string().unwrap_or_default()
            ),
            Err(e) => panic!("webdriver {path}: {e}"),
        }
    }

    /// Opens a page and waits for it to load.
    pub fn open(&self, url: &str) {
        self.call("/url", json!({ "url": url }));
    }

    /// Runs a script's body in the page; what it returns, as JSON.
    pub fn js(&self, script: &str) -> Value {
        self.call("/execute/sync", json!({ "script": script, "args": [] }))
    }

    fn element(&self, css: &str) -> String {
        let v = self.call("/element", json!({ "using": "css selector", "value": css }));
        v[ELEMENT]
            .as_str()
            .unwrap_or_else(|| panic!("no element {css}: {v}"))
            .to_string()
    }

    /// A real click, as a user's.
    pub fn click(&self, css: &str) {
        let e = self.element(css);
        self.call(&format!("/element/{e}/click"), json!({}));
    }

    pub fn type_into(&self, css: &str, text: &str) {
        let e = self.element(css);
        self.call(&format!("/element/{e}/value"), json!({ "text": text }));
    }

    /// The text of the element with `id`, empty when it has none.
    pub fn text(&self, id: &str) -> String {
        let v = self.js(&format!(
            "return document.getElementById('{id}').textContent"
        ));
        v.as_str().unwrap_or_default().to_string()
    }

    pub fn disabled(&self, id: &str) -> bool {
        self.js(&format!("return document.getElementById('{id}').disabled"))
            .as_bool()
            .unwrap_or(false)
    }

    /// Whether the element takes up room on the page (neither it nor a parent hidden).
    pub fn shown(&self, id: &str) -> bool {
        self.js(&format!(
            "return document.getElementById('{id}').offsetParent !== null"
        ))
        .as_bool()
        .unwrap_or(false)
    }

    /// Waits, 20 s at most, until the page shows what `ok` looks for.
    pub fn wait(&self, what: &str, mut ok: impl FnMut(&Browser) -> bool) {
        wait_until(what, Duration::from_secs(20), || ok(self));
    }

    /// Saves what the window shows as a PNG file at `path`.
    pub fn screenshot(&self, path: &Path) {
        use base64::Engine;
        let png = self.call("/screenshot", Value::Null);
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(png.as_str().expect("base64"))
            .expect("png");
        std::fs::write(path, bytes).expect("write screenshot");
    }

    /// Processes still running with this browser's profile: its Chromium, if ending the
    /// session left any behind.
    fn leftovers(&self) -> Vec<String> {
        let flag = format!("--user-data-dir={}", self.profile.path().display());
        let Ok(procs) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        procs
            .flatten()
            .filter_map(|p| {
                let pid = p.file_name().to_str()?.parse::<u32>().ok()?;
                let cmdline = std::fs::read(p.path().join("cmdline")).ok()?;
                cmdline
                    .split(|b| *b == 0)
                    .any(|arg| arg == flag.as_bytes())
                    .then(|| pid.to_string())
            })
            .collect()
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if !self.session.is_empty() {
            let _ = self
                .http
                .delete(&format!("{}/session/{}", self.base, self.session))
                .call();
        }
        let _ = self.driver.kill();
        let _ = self.driver.wait();
        let left = self.leftovers();
        if !left.is_empty() {
            let _ = Command::new("kill").arg("-9").args(&left).status();
        }
    }
}
