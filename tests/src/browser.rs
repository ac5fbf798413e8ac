//! A real headless browser for the console's tests: Debian's Chromium driven over the Chrome
//! DevTools Protocol on `--remote-debugging-pipe` (NUL-separated JSON on file descriptors 3
//! and 4; no port, no driver). Clicks and typing go through CDP's input events, as a
//! person's would; every request the page makes is recorded.

use serde_json::{Value, json};
use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Where Debian's `chromium` package puts the browser.
pub const CHROMIUM: &str = "/usr/bin/chromium";

/// One headless Chromium with one page.
pub struct Browser {
    child: Child,
    commands: File,
    messages: mpsc::Receiver<Value>,
    next_id: u64,
    session: String,
    /// Every URL the page requested, in order.
    pub requests: Vec<String>,
    /// Console messages and exceptions of the page.
    pub console: Vec<String>,
    _profile: tempfile::TempDir,
}

fn pipe() -> (OwnedFd, OwnedFd) {
    let mut fds = [0; 2];
    // Close-on-exec: only the two the browser is given (dup2 below) reach it, and no other
    // child of the test holds them open.
    // SAFETY: `fds` is a valid array of two descriptors for pipe2(2) to fill.
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    assert_eq!(rc, 0, "pipe: {}", std::io::Error::last_os_error());
    // SAFETY: pipe(2) succeeded: both descriptors are open and owned by nobody else.
    unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) }
}

impl Browser {
    /// Starts Chromium (headless, its own empty profile, no background networking) with a
    /// blank page `width` x `height`.
    pub fn launch(width: u32, height: u32) -> Browser {
        assert!(std::path::Path::new(CHROMIUM).exists(), "{CHROMIUM} is missing: apt-get install chromium");
        let profile = tempfile::tempdir().unwrap();
        // The browser reads commands on fd 3 and writes answers on fd 4.
        let (commands_read, commands_write) = pipe();
        let (answers_read, answers_write) = pipe();
        let (child_in, child_out) = (commands_read.as_raw_fd(), answers_write.as_raw_fd());
        let mut command = Command::new(CHROMIUM);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--no-default-browser-check",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--disable-extensions",
                "--disable-dev-shm-usage",
                "--mute-audio",
                "--remote-debugging-pipe",
                &format!("--window-size={width},{height}"),
                &format!("--user-data-dir={}", profile.path().display()),
                "about:blank",
            ])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: only async-signal-safe calls (fcntl, dup2) between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // Copies above fd 10 first, so that neither lands on the other's target.
                let (from_in, from_out) =
                    (libc::fcntl(child_in, libc::F_DUPFD, 10), libc::fcntl(child_out, libc::F_DUPFD, 10));
                if from_in < 0 || from_out < 0 || libc::dup2(from_in, 3) < 0 || libc::dup2(from_out, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().expect("cannot start chromium");
        drop((commands_read, answers_write));
        let (tx, messages) = mpsc::channel();
        let answers = File::from(answers_read);
        std::thread::spawn(move || {
            let mut reader = BufReader::new(answers);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                if message.last() == Some(&0) {
                    message.pop();
                }
                if let Ok(value) = serde_json::from_slice::<Value>(&message)
                    && tx.send(value).is_err()
                {
                    return;
                }
                message.clear();
            }
        });
        let mut browser = Browser {
            child,
            commands: File::from(commands_write),
            messages,
            next_id: 0,
            session: String::new(),
            requests: Vec::new(),
            console: Vec::new(),
            _profile: profile,
        };
        let target = browser.browser_call("Target.createTarget", json!({"url": "about:blank"}));
        let target = target["targetId"].as_str().expect("a target id").to_owned();
        let attached = browser.browser_call("Target.attachToTarget", json!({"targetId": target, "flatten": true}));
        browser.session = attached["sessionId"].as_str().expect("a session id").to_owned();
        for domain in ["Page.enable", "Network.enable", "Runtime.enable"] {
            browser.call(domain, json!({}));
        }
        browser.resize(width, height, false);
        browser
    }

    fn send(&mut self, method: &str, params: Value, session: bool) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if session {
            message["sessionId"] = self.session.clone().into();
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).expect("chromium stopped reading commands");
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.messages.recv_timeout(left).unwrap_or_else(|_| panic!("no answer to {method}"));
            if message["id"].as_u64() == Some(id) {
                if let Some(error) = message.get("error") {
                    panic!("{method} failed: {error}");
                }
                return message["result"].clone();
            }
            self.event(&message);
        }
    }

    fn event(&mut self, message: &Value) {
        let params = &message["params"];
        match message["method"].as_str() {
            Some("Network.requestWillBeSent") => {
                if let Some(url) = params["request"]["url"].as_str() {
                    self.requests.push(url.to_owned());
                }
            }
            Some("Runtime.consoleAPICalled") => {
                let args: Vec<String> = params["args"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| a["value"].as_str().map(str::to_owned).unwrap_or_else(|| a.to_string()))
                    .collect();
                self.console.push(format!("{}: {}", params["type"], args.join(" ")));
            }
            Some("Runtime.exceptionThrown") => self.console.push(format!("exception: {}", params["exceptionDetails"])),
            _ => {}
        }
    }

    fn browser_call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, false)
    }

    /// A CDP command on the page.
    pub fn call(&mut self, method: &str, params: Value) -> Value {
        self.send(method, params, true)
    }

    /// Reads the events that arrived meanwhile (requests, console messages).
    pub fn pump(&mut self) {
        while let Ok(message) = self.messages.try_recv() {
            self.event(&message);
        }
    }

    /// The viewport: `mobile` emulates a phone.
    pub fn resize(&mut self, width: u32, height: u32, mobile: bool) {
        let metrics = json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile});
        self.call("Emulation.setDeviceMetricsOverride", metrics);
    }

    /// Opens `url` and waits for its load event.
    pub fn goto(&mut self, url: &str) {
        self.call("Page.navigate", json!({"url": url}));
        self.wait_for("document.readyState === 'complete'", Duration::from_secs(20));
    }

    /// The value of `expression` in the page (promises awaited).
    pub fn eval(&mut self, expression: &str) -> Value {
        let params = json!({"expression": expression, "awaitPromise": true, "returnByValue": true});
        let result = self.call("Runtime.evaluate", params);
        if let Some(exception) = result.get("exceptionDetails") {
            panic!("`{expression}` threw: {exception}");
        }
        result["result"]["value"].clone()
    }

    /// Waits until `condition` is truthy in the page; its value. Panics after `timeout`
    /// with what the page shows.
    pub fn wait_for(&mut self, condition: &str, timeout: Duration) -> Value {
        let deadline = Instant::now() + timeout;
        loop {
            let value =
                self.eval(&format!("(() => {{ try {{ return ({condition}); }} catch (e) {{ return null; }} }})()"));
            if !(value.is_null() || value == false || value == "" || value == 0) {
                return value;
            }
            if Instant::now() > deadline {
                let text = self.eval("document.body.innerText");
                panic!(
                    "`{condition}` did not hold within {timeout:?}; the page shows:\n{text}\nconsole: {:#?}",
                    self.console
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits for the element `selector` and clicks its centre with the mouse.
    pub fn click(&mut self, selector: &str) {
        let selector_js = serde_json::to_string(selector).unwrap();
        self.wait_for(&format!("document.querySelector({selector_js})"), Duration::from_secs(10));
        let point = self.eval(&format!(
            "(() => {{ const e = document.querySelector({selector_js}); e.scrollIntoView({{block: 'center'}}); \
             const r = e.getBoundingClientRect(); return [r.left + r.width / 2, r.top + r.height / 2]; }})()"
        ));
        let (x, y) = (point[0].as_f64().unwrap(), point[1].as_f64().unwrap());
        for kind in ["mouseMoved", "mousePressed", "mouseReleased"] {
            let event = json!({"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1});
            self.call("Input.dispatchMouseEvent", event);
        }
    }

    /// Focuses the field `selector`, clears it, and types `text` into it.
    pub fn type_into(&mut self, selector: &str, text: &str) {
        let selector_js = serde_json::to_string(selector).unwrap();
        self.wait_for(&format!("document.querySelector({selector_js})"), Duration::from_secs(10));
        self.eval(&format!("(() => {{ const e = document.querySelector({selector_js}); e.focus(); e.select(); }})()"));
        self.call("Input.insertText", json!({"text": text}));
    }

    /// Presses one key (`Enter`, `Tab`) on whatever has the focus.
    pub fn press(&mut self, key: &str) {
        let code = match key {
            "Enter" => 13,
            "Tab" => 9,
            _ => 0,
        };
        for kind in ["keyDown", "keyUp"] {
            let text = if key == "Enter" && kind == "keyDown" { "\r" } else { "" };
            let event = json!({"type": kind, "key": key, "code": key, "windowsVirtualKeyCode": code, "text": text});
            self.call("Input.dispatchKeyEvent", event);
        }
    }

    /// A PNG of the viewport, written to `path`.
    pub fn screenshot(&mut self, path: &std::path::Path) {
        let shot = self.call("Page.captureScreenshot", json!({"format": "png"}));
        let data = shot["data"].as_str().expect("screenshot data");
        std::fs::write(path, decode_base64(data)).unwrap();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Standard base64 (CDP's screenshots), without a dependency for it.
fn decode_base64(text: &str) -> Vec<u8> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let mut out = Vec::with_capacity(text.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in text.bytes().filter_map(value) {
        acc = (acc << 6) | c;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
            acc &= (1 << bits) - 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_decodes() {
        assert_eq!(super::decode_base64("aGVsbG8gd29ybGQ="), b"hello world");
        assert_eq!(super::decode_base64("YQ=="), b"a");
    }
}
