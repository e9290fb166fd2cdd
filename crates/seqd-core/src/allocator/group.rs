//! Grouped first reservations: the first fetch of a name this instance has
//! not served yet joins a queue, and the queue is reserved in groups, one
//! operation of the store per group ([`Segments::reserve_group`]), one group
//! at a time: names that arrive while a group is in flight form the next
//! one, as the requests of a global sequence merge (docs/design.md,
//! "Grouped first reservations"). A group in flight for longer than
//! [`SLOW_GROUP`] (a locked row, a slow database) lets another start beside
//! it, up to [`GROUPS_IN_FLIGHT`]: at that mark if asks are queued, or at
//! the next ask, so that one stuck group does not hold every first use
//! behind it.
//!
//! Only stores whose [`Segments::group_limit`] is above 1 are grouped; each
//! answer goes back to its own buffer's fetch, which installs it as it
//! would install a reservation made alone (its step, its regression check,
//! its error).

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use foldhash::fast::RandomState;
use tokio::sync::oneshot;
use tokio::time::Instant;

use crate::domain::SeqName;
use crate::store::{Reserved, Segments, StoreError};

/// Histogram: first reservations made by one operation of the store.
pub const GROUP_SIZE_METRIC: &str = "seqd_first_reservations_grouped";

/// Most groups reserved at once. Each holds one of the store's connections
/// for one statement; the rest of the pool stays for the fetches of live
/// names.
pub const GROUPS_IN_FLIGHT: usize = 4;

/// How long the groups in flight may all have been running before one more
/// starts beside them. One group at a time makes the largest groups, and
/// served the most first uses per second on every backend (BENCHMARKS.md,
/// "First uses after a restart"); a group takes a few milliseconds.
pub const SLOW_GROUP: Duration = Duration::from_millis(50);

/// One name's first reservation, waiting for its group.
struct Ask {
    name: SeqName,
    min_size: i64,
    reply: oneshot::Sender<Reserved>,
}

/// The asks not yet in a group, how many groups are in flight, and when
/// the last of them started.
#[derive(Default)]
struct Queue {
    asks: Vec<Ask>,
    running: usize,
    last_start: Option<Instant>,
}

impl Queue {
    /// Whether an ask arriving now starts a runner: none runs, or every
    /// group in flight started more than [`SLOW_GROUP`] ago (then one more
    /// runs beside them, up to [`GROUPS_IN_FLIGHT`]).
    fn starts_runner(&self, now: Instant) -> bool {
        match self.last_start {
            _ if self.running == 0 => true,
            _ if self.running >= GROUPS_IN_FLIGHT => false,
            Some(at) => now.saturating_duration_since(at) > SLOW_GROUP,
            None => false,
        }
    }
}

/// The queue of first reservations of one allocator.
pub(crate) struct Grouper {
    store: Arc<dyn Segments>,
    /// Most asks per group: the store's [`Segments::group_limit`].
    limit: usize,
    /// Longest one group may take (the allocator's fetch timeout): past it
    /// every ask of the group is answered "unavailable" and the group is
    /// abandoned (what it reserved, if it commits later, is a gap).
    timeout: Duration,
    queue: Mutex<Queue>,
}

impl Grouper {
    /// A queue over `store`, or `None` when the store groups nothing.
    pub(crate) fn over(store: &Arc<dyn Segments>, timeout: Duration) -> Option<Arc<Grouper>> {
        let limit = store.group_limit();
        (limit > 1).then(|| {
            Arc::new(Grouper {
                store: store.clone(),
                limit,
                timeout,
                queue: Mutex::new(Queue::default()),
            })
        })
    }

    /// Reserves the first range of `name` in the next group (see
    /// [`Segments::reserve`]).
    pub(crate) async fn reserve(self: Arc<Self>, name: SeqName, min_size: i64) -> Reserved {
        let (reply, answer) = oneshot::channel();
        self.clone().start_if(|queue| {
            queue.asks.push(Ask {
                name,
                min_size,
                reply,
            });
            queue.starts_runner(Instant::now())
        });
        answer
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("reservation group ended".into())))
    }

    /// Reserves groups while asks wait; ends when the queue is empty.
    async fn run(self: Arc<Self>) {
        loop {
            let group = self.next_group();
            if group.is_empty() {
                return;
            }
            metrics::histogram!(GROUP_SIZE_METRIC).record(group.len() as f64);
            let asks: Vec<(SeqName, i64)> =
                group.iter().map(|a| (a.name.clone(), a.min_size)).collect();
            let reserving = tokio::time::timeout(self.timeout, self.store.reserve_group(&asks));
            tokio::pin!(reserving);
            // Past SLOW_GROUP, the asks queued behind this group get a
            // runner beside it, whether or not more asks arrive.
            let slow = tokio::time::sleep(SLOW_GROUP);
            tokio::pin!(slow);
            let mut helped = false;
            let answers = loop {
                tokio::select! {
                    biased;
                    answers = &mut reserving => break answers,
                    () = &mut slow, if !helped => {
                        helped = true;
                        // This group is past SLOW_GROUP: one more runner
                        // for the asks queued behind it, up to the cap.
                        self.clone().start_if(|queue| {
                            !queue.asks.is_empty() && queue.running < GROUPS_IN_FLIGHT
                        });
                    }
                }
            };
            let mut answers = match answers {
                Ok(answers) if answers.len() == group.len() => answers.into_iter(),
                Ok(answers) => {
                    tracing::error!(
                        asked = group.len(),
                        answered = answers.len(),
                        "a reservation group answered the wrong number of names"
                    );
                    Vec::new().into_iter()
                }
                Err(_) => Vec::new().into_iter(),
            };
            for ask in group {
                // A caller that went away leaves its range unused: a gap.
                let _ = ask.reply.send(answers.next().unwrap_or_else(|| {
                    Err(StoreError::Unavailable(
                        "reservation group timed out".into(),
                    ))
                }));
            }
        }
    }

    /// Under the queue's lock, runs `wanted` and, when it says so, counts
    /// one more runner in; then starts that runner.
    fn start_if(self: Arc<Self>, wanted: impl FnOnce(&mut Queue) -> bool) {
        let start = {
            let mut queue = self.queue.lock().unwrap();
            let start = wanted(&mut queue);
            if start {
                queue.running += 1;
            }
            start
        };
        if start {
            tokio::spawn(self.run());
        }
    }

    /// Takes the next group off the queue: up to `limit` asks whose caller
    /// still waits, each name once (a second ask of a name stays for the
    /// next group). Empty, and this runner counted out, when none waits.
    fn next_group(&self) -> Vec<Ask> {
        let mut queue = self.queue.lock().unwrap();
        queue.asks.retain(|a| !a.reply.is_closed());
        let mut group: Vec<Ask> = Vec::with_capacity(queue.asks.len().min(self.limit));
        let mut names = HashSet::with_capacity_and_hasher(group.capacity(), RandomState::default());
        let mut rest = Vec::new();
        for ask in queue.asks.drain(..) {
            if group.len() < self.limit && names.insert(ask.name.clone()) {
                group.push(ask);
            } else {
                rest.push(ask);
            }
        }
        queue.asks = rest;
        if group.is_empty() {
            queue.running -= 1;
        } else {
            queue.last_start = Some(Instant::now());
        }
        group
    }
}
