//! Runs seqd's HTTP server in-process on 127.0.0.1:0 for the API tests, and
//! stops it (gracefully) when dropped.

#![allow(dead_code)]

use std::net::SocketAddr;
use std::sync::Arc;

use seqd::config::Settings;
use seqd::http::serve;
use seqd::startup;
use seqd::store::{Database, Store, WorkerLeases};
use tokio::sync::oneshot;

/// Resolves when the server is to stop.
type Stop = std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>;

/// A running server.
pub struct TestServer {
    /// Its address.
    pub addr: SocketAddr,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The RESP listener's `127.0.0.1:PORT`, when the settings asked for
    /// one (`resp_listen`: any value; a port of its own is bound).
    pub resp: Option<String>,
    /// The store it serves from (for direct checks).
    pub store: Arc<dyn Store>,
    /// A client with short timeouts.
    pub http: reqwest::Client,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<anyhow::Result<()>>>,
    /// Its share of the process's request metrics ([`requests_alone`]),
    /// held while it lives; none for the server of the test counting them.
    _requests: Option<RequestsShared>,
}

impl TestServer {
    /// Starts a server on `settings.database_url` (migrated first).
    pub async fn start(settings: Settings) -> TestServer {
        let database =
            seqd::open::open_database_with(&settings.database_urls[0], &settings.store_options())
                .await
                .expect("open database");
        Self::start_with_database(settings, database).await
    }

    /// Starts a server with the default settings on the database at `url`.
    #[allow(dead_code)] // not every test binary starts one this way
    pub async fn on(url: &str) -> TestServer {
        Self::start(Settings::for_database(url.to_string())).await
    }

    /// Starts a server on an already opened database: its sequences, and
    /// its worker leases for snowflake IDs.
    pub async fn start_with_database(settings: Settings, database: Database) -> TestServer {
        let requests = requests_shared().await;
        let mut server =
            Self::start_on(settings, database.sequences(), Some(database.leases())).await;
        server._requests = Some(requests);
        server
    }

    /// [`TestServer::start`] for the test that holds the request metrics
    /// alone: this server is the only one of the process while it lives.
    pub async fn start_counted(settings: Settings, _alone: &RequestsAlone) -> TestServer {
        let database =
            seqd::open::open_database_with(&settings.database_urls[0], &settings.store_options())
                .await
                .expect("open database");
        Self::start_on(settings, database.sequences(), Some(database.leases())).await
    }

    /// Starts a server on a store without a database for worker leases (the
    /// in-memory one): snowflake IDs must be disabled.
    pub async fn start_with_store(settings: Settings, store: Arc<dyn Store>) -> TestServer {
        let requests = requests_shared().await;
        let mut server = Self::start_on(settings, store, None).await;
        server._requests = Some(requests);
        server
    }

    /// Starts a server on `store`, with snowflake worker IDs leased in `leases`.
    async fn start_on(
        settings: Settings,
        store: Arc<dyn Store>,
        leases: Option<Arc<dyn WorkerLeases>>,
    ) -> TestServer {
        let served = store.clone();
        // A RESP door asked for is bound here, on a port of its own.
        let resp = match settings.resp_listen {
            Some(_) => Some(
                tokio::net::TcpListener::bind("127.0.0.1:0")
                    .await
                    .expect("bind RESP"),
            ),
            None => None,
        };
        let resp_addr = resp.as_ref().map(|l| l.local_addr().unwrap().to_string());
        let mut server = Self::spawn(store, move |listener, stop| async move {
            startup::run_with_resp(listener, resp, served, leases, &settings, stop).await
        })
        .await;
        server.resp = resp_addr;
        server
    }

    /// Serves an application built by the test (a state no [`Settings`]
    /// describe: an injected snowflake clock, say) with the default
    /// connection limits; `store` is the one its allocator serves from.
    pub async fn serve_app(app: seqd::http::App, store: Arc<dyn Store>) -> TestServer {
        let requests = requests_shared().await;
        let mut server = Self::spawn(store, move |listener, stop| async move {
            Ok(serve::serve(listener, app, Default::default(), stop).await?)
        })
        .await;
        server._requests = Some(requests);
        server
    }

    /// Binds 127.0.0.1:0 and spawns `serve(listener, stop)`.
    async fn spawn<F, Fut>(store: Arc<dyn Store>, serve: F) -> TestServer
    where
        F: FnOnce(tokio::net::TcpListener, Stop) -> Fut,
        Fut: std::future::Future<Output = anyhow::Result<()>> + Send + 'static,
    {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().unwrap();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(serve(
            listener,
            Box::pin(async {
                let _ = rx.await;
            }),
        ));
        let http = client(std::time::Duration::from_secs(30));
        TestServer {
            addr,
            base: format!("http://{addr}"),
            resp: None,
            store,
            http,
            stop: Some(tx),
            task: Some(task),
            _requests: None,
        }
    }

    /// The full URL of `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.base, path)
    }

    /// `GET path` (panics if the request cannot be sent).
    pub async fn get(&self, path: &str) -> reqwest::Response {
        self.http.get(self.url(path)).send().await.unwrap()
    }

    /// `method path` without a body (panics if the request cannot be sent).
    pub async fn send(&self, method: reqwest::Method, path: &str) -> reqwest::Response {
        self.http
            .request(method, self.url(path))
            .send()
            .await
            .unwrap()
    }

    /// `method path` without a body, asking for `text/plain` (panics if the
    /// request cannot be sent).
    pub async fn send_plain(&self, method: reqwest::Method, path: &str) -> reqwest::Response {
        self.http
            .request(method, self.url(path))
            .header("accept", "text/plain")
            .send()
            .await
            .unwrap()
    }

    /// `method path` with `token` as Bearer and `body` as JSON (no body when
    /// `None`; panics if the request cannot be sent).
    pub async fn send_as(
        &self,
        token: &str,
        method: reqwest::Method,
        path: &str,
        body: Option<&serde_json::Value>,
    ) -> reqwest::Response {
        send_as_to(&self.http, self.url(path), token, method, body).await
    }

    /// `POST /v1/tokens` with `body` as the admin `admin` (asserting 201):
    /// the answer, with the token's text in `token`.
    #[allow(dead_code)] // not every test binary makes client tokens
    pub async fn make_token(&self, admin: &str, body: &serde_json::Value) -> serde_json::Value {
        let resp = self
            .send_as(admin, reqwest::Method::POST, "/v1/tokens", Some(body))
            .await;
        assert_eq!(resp.status(), reqwest::StatusCode::CREATED, "{body}");
        resp.json().await.unwrap()
    }

    /// The text of a new token `label` with one prefix and one right, made
    /// as the admin `admin`.
    #[allow(dead_code)] // not every test binary makes client tokens
    pub async fn token(&self, admin: &str, label: &str, prefix: &str, right: &str) -> String {
        let body = serde_json::json!({"label": label, "prefixes": [prefix], "rights": [right]});
        let made = self.make_token(admin, &body).await;
        made["token"].as_str().unwrap().to_owned()
    }

    /// `method path` with a JSON body (panics if the request cannot be sent).
    pub async fn send_json(
        &self,
        method: reqwest::Method,
        path: &str,
        body: &serde_json::Value,
    ) -> reqwest::Response {
        self.http
            .request(method, self.url(path))
            .json(body)
            .send()
            .await
            .unwrap()
    }

    /// `GET path`, answered 2xx with a JSON body (panics otherwise).
    #[allow(dead_code)] // not every test binary reads JSON this way
    pub async fn get_json(&self, path: &str) -> serde_json::Value {
        let resp = self.get(path).await;
        assert!(resp.status().is_success(), "GET {path}: {}", resp.status());
        resp.json().await.unwrap()
    }

    /// The value of the sample `series` (a name with its labels, as
    /// written: `seqd_names_in_memory{state="live"}`) on `/metrics`, if
    /// the scrape has it.
    #[allow(dead_code)] // not every test binary reads metrics this way
    pub async fn metric(&self, series: &str) -> Option<f64> {
        let metrics = self.get("/metrics").await.text().await.unwrap();
        let prefix = format!("{series} ");
        metrics
            .lines()
            .find_map(|l| l.strip_prefix(prefix.as_str()))
            .map(|v| v.trim().parse().unwrap())
    }

    /// `POST /v1/sequences` with `body`, whatever the answer.
    #[allow(dead_code)] // not every test binary creates sequences over HTTP
    pub async fn post_sequence(&self, body: &serde_json::Value) -> reqwest::Response {
        self.send_json(reqwest::Method::POST, "/v1/sequences", body)
            .await
    }

    /// `PATCH /v1/sequences/{name}` with `body`, whatever the answer.
    #[allow(dead_code)] // not every test binary changes sequences over HTTP
    pub async fn patch_sequence(&self, name: &str, body: &serde_json::Value) -> reqwest::Response {
        self.send_json(
            reqwest::Method::PATCH,
            &format!("/v1/sequences/{name}"),
            body,
        )
        .await
    }

    /// Creates the sequence `name` from `start` by `step` (asserting 201);
    /// the row as answered.
    #[allow(dead_code)] // not every test binary creates sequences over HTTP
    pub async fn create(&self, name: &str, start: i64, step: i64) -> serde_json::Value {
        create_at(&self.http, &self.base, name, start, step).await
    }

    /// Creates `global`, a sequence of global ordering by 10, and `serial`,
    /// a serial one of `format` reset every year (asserting 201 each).
    #[allow(dead_code)] // not every test binary creates these
    pub async fn create_global_and_serial(&self, global: &str, serial: &str, format: &str) {
        for body in [
            serde_json::json!({"name": global, "step": 10, "ordering": "global"}),
            serde_json::json!({"name": serial, "format": format, "reset": "year"}),
        ] {
            let created = self.post_sequence(&body).await.status();
            assert_eq!(created, reqwest::StatusCode::CREATED, "{body}");
        }
    }

    /// The next ID of `name` (asserting 200).
    #[allow(dead_code)] // not every test binary draws IDs over HTTP
    pub async fn next(&self, name: &str) -> i64 {
        next_at(&self.http, &self.base, name).await
    }

    /// Stops the server and waits for it to finish.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            task.await.expect("server task").expect("server result");
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

/// The request metrics (`seqd_http_requests_total` and its latency
/// histogram) are one recorder per process, shared by every server and
/// router the tests of a binary run in it. A test that counts requests
/// exactly takes them alone ([`requests_alone`]); every other in-process
/// server holds a share while it lives ([`requests_shared`], taken by
/// [`TestServer`]'s constructors; a test calling the router itself takes one
/// too). Shares are never refused while no test counts, so a test holding
/// two servers cannot wait on itself; the counting test waits until no
/// server is left (at the latest, when the others are done).
static REQUESTS: Gate = Gate::new();

/// A share of the request metrics (see [`REQUESTS`]).
pub struct RequestsShared(&'static Gate);

/// The request metrics held alone (see [`REQUESTS`]).
pub struct RequestsAlone(&'static Gate);

/// A share of the request metrics, for as long as it is held.
pub async fn requests_shared() -> RequestsShared {
    REQUESTS.enter(false).await;
    RequestsShared(&REQUESTS)
}

/// The request metrics alone, for as long as it is held: no other
/// in-process server or router counts a request meanwhile.
pub async fn requests_alone() -> RequestsAlone {
    REQUESTS.enter(true).await;
    RequestsAlone(&REQUESTS)
}

impl Drop for RequestsShared {
    fn drop(&mut self) {
        self.0.leave(false);
    }
}

impl Drop for RequestsAlone {
    fn drop(&mut self) {
        self.0.leave(true);
    }
}

/// Shared holders and at most one holder alone, never both; a share is
/// given whenever no one holds it alone (no preference for a waiting
/// holder alone, which would make a test taking two shares wait on itself).
struct Gate {
    state: std::sync::Mutex<(usize, bool)>,
    changed: tokio::sync::Notify,
}

impl Gate {
    const fn new() -> Gate {
        Gate {
            state: std::sync::Mutex::new((0, false)),
            changed: tokio::sync::Notify::const_new(),
        }
    }

    async fn enter(&self, alone: bool) {
        loop {
            let changed = self.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            {
                let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
                let (shares, held_alone) = *state;
                if alone && shares == 0 && !held_alone {
                    state.1 = true;
                    return;
                }
                if !alone && !held_alone {
                    state.0 += 1;
                    return;
                }
            }
            changed.await;
        }
    }

    fn leave(&self, alone: bool) {
        let mut state = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if alone {
            state.1 = false;
        } else {
            state.0 -= 1;
        }
        drop(state);
        self.changed.notify_waiters();
    }
}

/// The names of the sequences of a `GET /v1/sequences` answer, in order
/// (panics, showing `page`, if it lists none or a name is not a string).
#[allow(dead_code)] // not every test binary lists sequences
pub fn listed_names(page: &serde_json::Value) -> Vec<String> {
    page["sequences"]
        .as_array()
        .unwrap_or_else(|| panic!("no sequences in {page}"))
        .iter()
        .map(|s| {
            s["name"]
                .as_str()
                .unwrap_or_else(|| panic!("a name that is not a string in {page}"))
                .to_owned()
        })
        .collect()
}

/// An HTTP client whose requests time out after `timeout`.
pub fn client(timeout: std::time::Duration) -> reqwest::Client {
    reqwest::Client::builder().timeout(timeout).build().unwrap()
}

/// `POST {base}/v1/sequences` with `http` and `body`, asserting 201; the row
/// as answered. For servers a test reaches by address only.
#[allow(dead_code)] // not every test binary creates sequences this way
pub async fn create_with(
    http: &reqwest::Client,
    base: &str,
    body: &serde_json::Value,
) -> serde_json::Value {
    let what = format!("create {}", body["name"]);
    answered(
        http.post(format!("{base}/v1/sequences")).json(body),
        &what,
        201,
    )
    .await
}

/// `POST {base}/v1/sequences` with `http`: creates `name` from `start` by
/// `step`, asserting 201; the row as answered. For servers a test reaches by
/// address only (a [`Process`], or from a spawned task).
#[allow(dead_code)] // not every test binary creates sequences over HTTP
pub async fn create_at(
    http: &reqwest::Client,
    base: &str,
    name: &str,
    start: i64,
    step: i64,
) -> serde_json::Value {
    let body = serde_json::json!({"name": name, "start": start, "step": step});
    create_with(http, base, &body).await
}

/// `GET {base}/v1/sequences/{name}/next` with `http`, asserting 200; its
/// `"id"`. For servers a test reaches by address only.
#[allow(dead_code)] // not every test binary draws IDs over HTTP
pub async fn next_at(http: &reqwest::Client, base: &str, name: &str) -> i64 {
    let body = answered(
        http.get(format!("{base}/v1/sequences/{name}/next")),
        &format!("next {name}"),
        200,
    )
    .await;
    body["id"]
        .as_i64()
        .unwrap_or_else(|| panic!("next {name}: no integer id in {body}"))
}

/// Sends `req`, asserting the answer's status is `status`; its JSON body
/// (panics, saying `what`, otherwise).
async fn answered(req: reqwest::RequestBuilder, what: &str, status: u16) -> serde_json::Value {
    let resp = req.send().await.unwrap_or_else(|e| panic!("{what}: {e}"));
    let got = resp.status();
    let text = resp.text().await.unwrap();
    assert_eq!(got, status, "{what}: {text}");
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"))
}

/// `method url` with `http`, `token` as Bearer and `body` as JSON (no body
/// when `None`; panics if the request cannot be sent). For servers a test
/// reaches by address only.
pub async fn send_as_to(
    http: &reqwest::Client,
    url: String,
    token: &str,
    method: reqwest::Method,
    body: Option<&serde_json::Value>,
) -> reqwest::Response {
    let mut req = http.request(method, url).bearer_auth(token);
    if let Some(body) = body {
        req = req.json(body);
    }
    req.send().await.unwrap()
}

/// Asserts `resp` is the documented JSON error body of `code` with
/// `status`: its message (panics if there is none).
#[allow(dead_code)] // not every test binary checks error bodies
pub async fn expect_error(
    resp: reqwest::Response,
    status: reqwest::StatusCode,
    code: &str,
) -> String {
    assert_eq!(resp.status(), status, "status for {code}");
    let body: serde_json::Value = resp.json().await.expect("JSON body");
    assert_eq!(body["error"]["code"], code, "{body}");
    body["error"]["message"]
        .as_str()
        .expect("message")
        .to_string()
}

/// Sends `req` (to a server a test reaches by address only); the answer's
/// body as JSON, whatever its status (panics if it cannot be sent or read).
#[allow(dead_code)] // not every test binary reads answers this way
pub async fn fetch_json(req: reqwest::RequestBuilder) -> serde_json::Value {
    req.send().await.unwrap().json().await.unwrap()
}

/// Sends `req`; the answer's body as text, whatever its status (panics if
/// it cannot be sent or read).
#[allow(dead_code)] // not every test binary reads answers this way
pub async fn fetch_text(req: reqwest::RequestBuilder) -> String {
    req.send().await.unwrap().text().await.unwrap()
}

/// A `seqd serve` child process listening on 127.0.0.1:0, or on the
/// `--listen` among its flags (the port is read from its JSON start-up log
/// line); killed when dropped.
pub struct Process {
    child: tokio::process::Child,
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// The RESP listener's `127.0.0.1:PORT`, when started with
    /// `--resp-listen` (read from the start-up log line).
    pub resp: Option<String>,
    /// The health listener's `http://127.0.0.1:PORT`, when started with
    /// `--health-listen`.
    pub health: Option<String>,
    /// The child's process id.
    pub pid: u32,
    /// Its log lines (JSON) read so far, but the start-up line.
    logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Process {
    /// Starts `seqd serve` on `database_url` with extra flags.
    pub async fn spawn(database_url: &str, extra: &[&str]) -> Process {
        Self::spawn_with_env(database_url, extra, &[]).await
    }

    /// Starts `seqd serve` on `database_url` with extra flags and
    /// environment variables.
    pub async fn spawn_with_env(
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Process {
        Self::spawn_under(&[], database_url, extra, env).await
    }

    /// Starts `seqd serve` as the last argument of `wrapper` (such as
    /// `["prlimit", "--nofile=256:4096"]`; none when empty).
    pub async fn spawn_under(
        wrapper: &[&str],
        database_url: &str,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Process {
        use std::process::Stdio;
        use tokio::io::{AsyncBufReadExt, BufReader};

        let binary = env!("CARGO_BIN_EXE_seqd");
        let mut command = match wrapper.split_first() {
            Some((program, args)) => {
                let mut c = tokio::process::Command::new(program);
                c.args(args).arg(binary);
                c
            }
            None => tokio::process::Command::new(binary),
        };
        command.arg("serve");
        // 127.0.0.1:0 unless the test names its own address.
        if !extra.contains(&"--listen") {
            command.args(["--listen", "127.0.0.1:0"]);
        }
        let mut child = command
            .args(["--log-format", "json"])
            .args(extra)
            .env("SEQD_DATABASE_URL", database_url)
            .env("RUST_LOG", "info")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // A group of its own, killed whole when dropped: a wrapper that
            // forks seqd and waits, and killing only the wrapper
            // left seqd running after the test (it still served, held
            // database connections and took CPU from the tests after it).
            .process_group(0)
            .spawn()
            .expect("spawn seqd");
        let pid = child.id().expect("pid");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        // The lines before the start-up line are kept too (start-up warnings).
        let mut before = Vec::new();
        let (addr, resp, health) =
            tokio::time::timeout(std::time::Duration::from_secs(60), async {
                let mut said = Vec::new();
                while let Some(line) = lines.next_line().await.unwrap() {
                    let Ok(v) = serde_json::from_str::<serde_json::Value>(&line) else {
                        said.push(line);
                        continue;
                    };
                    if let Some(listen) = v["listen"].as_str() {
                        return (
                            listen.to_string(),
                            v["resp_listen"].as_str().map(str::to_owned),
                            v["health_listen"].as_str().map(|a| format!("http://{a}")),
                        );
                    }
                    before.push(line);
                }
                panic!(
                    "seqd exited before listening: {}\n{}",
                    said.join("\n"),
                    before.join("\n")
                );
            })
            .await
            .expect("seqd did not start in time");
        // Keep draining stderr so the child never blocks on a full pipe
        // (echoed when SEQD_TEST_ECHO_LOGS=1, to debug a test).
        let echo = std::env::var("SEQD_TEST_ECHO_LOGS").is_ok_and(|v| v == "1");
        let logs = std::sync::Arc::new(std::sync::Mutex::new(before));
        let kept = logs.clone();
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                if echo {
                    eprintln!("[seqd {pid}] {line}");
                }
                kept.lock().unwrap().push(line);
            }
        });
        Process {
            child,
            base: format!("http://{addr}"),
            resp,
            health,
            pid,
            logs,
        }
    }

    /// Sends a signal (`"TERM"`, `"KILL"`) to the process.
    pub fn signal(&self, sig: &str) {
        let status = std::process::Command::new("kill")
            .args([format!("-{sig}"), self.pid.to_string()])
            .status()
            .expect("run kill");
        assert!(status.success(), "kill -{sig} {}", self.pid);
    }

    /// Every log line read so far, as written (but the start-up line).
    pub fn all_logs(&self) -> Vec<String> {
        self.logs.lock().unwrap().clone()
    }

    /// Every log line (parsed JSON) read so far whose `message` is `message`.
    pub fn log_lines(&self, message: &str) -> Vec<serde_json::Value> {
        self.logs
            .lock()
            .unwrap()
            .iter()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|v| v["message"] == message)
            .collect()
    }

    /// The first log line (parsed JSON) whose `message` is `message`,
    /// waiting up to 5 s for it (lines may still be in the pipe after exit).
    pub async fn log_line(&self, message: &str) -> Option<serde_json::Value> {
        for _ in 0..50 {
            let found = self.logs.lock().unwrap().iter().find_map(|l| {
                serde_json::from_str::<serde_json::Value>(l)
                    .ok()
                    .filter(|v| v["message"] == message)
            });
            if found.is_some() {
                return found;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        None
    }

    /// Waits for the process to exit and returns its status.
    pub async fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().await.expect("wait for seqd")
    }

    /// Kills the process (SIGKILL) and reaps it.
    pub async fn kill(mut self) {
        let _ = self.child.start_kill();
        let _ = self.child.wait().await;
    }
}

impl Drop for Process {
    /// Kills the process group (the wrapper's children too); `kill_on_drop`
    /// then reaps the process itself.
    fn drop(&mut self) {
        let _ = std::process::Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", self.pid)])
            .stderr(std::process::Stdio::null())
            .status();
    }
}
