//! What the grade tests share: a judge that answers from a script, and a way to run the grading
//! functions to their end without an async runtime (nothing they await ever waits).

#![allow(dead_code)] // Each test binary uses its own part.

use cassette_grade::answer::{Answer, Reply};
use cassette_grade::judge::Ask;
use cassette_tape::Request;
use std::collections::VecDeque;
use std::future::Future;
use std::sync::Mutex;
use std::task::{Context, Poll, Waker};

/// Runs `future` to its end; it must not wait, as grading with [`Scripted`] never does.
pub(crate) fn now<F: Future>(future: F) -> F::Output {
    let mut future = std::pin::pin!(future);
    match future
        .as_mut()
        .poll(&mut Context::from_waker(Waker::noop()))
    {
        Poll::Ready(output) => output,
        Poll::Pending => panic!("grading waited, and nothing here ever wakes it"),
    }
}

/// Why the scripted judge gave no reply: what a replay miss is to the CLI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Missed(pub(crate) String);

/// One scripted answer of the judge.
pub(crate) enum Scripted {
    /// A reply with this status and text.
    Says(u16, &'static str),
    /// No reply: the grading stops with this error.
    Misses(&'static str),
}

/// A judge that answers each request with the next line of its script, replayed, and keeps
/// every request it was asked.
pub(crate) struct Judge {
    script: Mutex<VecDeque<Scripted>>,
    asked: Mutex<Vec<Request>>,
}

impl Judge {
    pub(crate) fn new(script: impl IntoIterator<Item = Scripted>) -> Judge {
        Judge {
            script: Mutex::new(script.into_iter().collect()),
            asked: Mutex::new(Vec::new()),
        }
    }

    /// The one that says PASS to everything.
    pub(crate) fn passing() -> Judge {
        Judge::new((0..100).map(|_| Scripted::Says(200, "PASS")))
    }

    /// The requests asked so far, in order.
    pub(crate) fn asked(&self) -> Vec<Request> {
        self.asked.lock().unwrap().clone()
    }

    /// The JSON bodies of the requests asked so far.
    pub(crate) fn bodies(&self) -> Vec<serde_json::Value> {
        self.asked()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect()
    }
}

impl Ask for Judge {
    type Error = Missed;

    async fn ask(&self, request: Request) -> Result<Reply, Missed> {
        let key = request
            .key(&cassette_keying::KeyConfig::default())
            .key
            .to_string();
        self.asked.lock().unwrap().push(request);
        let next = self.script.lock().unwrap().pop_front();
        match next.expect("the judge was asked more often than scripted") {
            Scripted::Says(status, text) => Ok(Reply {
                key,
                hit: true,
                status,
                answer: text_answer(text),
            }),
            Scripted::Misses(why) => Err(Missed(why.to_owned())),
        }
    }
}

/// An answer that is only text.
pub(crate) fn text_answer(text: &str) -> Answer {
    Answer {
        text: text.to_owned(),
        ..Answer::default()
    }
}
