//! Progress of a long read (cli-conventions §1, DEVIATIONS 94): the bytes
//! a command has read of a receipt or a bundle, reported to the sink the
//! CLI installed for this command, if any. The store only counts; how (and
//! whether) progress is drawn is the CLI's (`surface::progress`). Without a
//! sink nothing is counted or reported.

use std::cell::RefCell;
use std::io::{BufRead, Read};
use std::sync::Arc;

/// Where a command's progress goes (the CLI's terminal bar).
pub trait Sink: Send + Sync {
    /// A new task of `total` bytes, `what` naming it ("verify").
    fn task(&self, what: &str, total: u64) -> Box<dyn Task>;
}

/// One long read; dropping it ends it.
pub trait Task: Send {
    fn advance(&mut self, bytes: u64);
}

thread_local! {
    static CURRENT: RefCell<Option<(String, Arc<dyn Sink>)>> = const { RefCell::new(None) };
}

/// The sink of the command running on this thread until the guard drops.
pub struct Scope {
    previous: Option<(String, Arc<dyn Sink>)>,
}

/// Report the long reads of the command `what` to `sink` until the guard
/// drops.
pub fn begin(what: &str, sink: Arc<dyn Sink>) -> Scope {
    let previous = CURRENT.with(|c| c.borrow_mut().replace((what.to_string(), sink)));
    Scope { previous }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let previous = self.previous.take();
        CURRENT.with(|c| *c.borrow_mut() = previous);
    }
}

/// A reader whose consumed bytes are reported to the current sink.
pub struct Tracked<R> {
    inner: R,
    task: Option<Box<dyn Task>>,
}

impl<R> Tracked<R> {
    /// `inner`, of `total` bytes to read, tracked if a sink is installed.
    pub fn new(inner: R, total: u64) -> Tracked<R> {
        let task = CURRENT.with(|c| {
            c.borrow()
                .as_ref()
                .map(|(what, sink)| sink.task(what, total))
        });
        Tracked { inner, task }
    }

    fn advance(&mut self, bytes: usize) {
        if let Some(task) = self.task.as_mut() {
            task.advance(bytes as u64);
        }
    }
}

impl<R: Read> Read for Tracked<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.advance(n);
        Ok(n)
    }
}

impl<R: BufRead> BufRead for Tracked<R> {
    fn fill_buf(&mut self) -> std::io::Result<&[u8]> {
        self.inner.fill_buf()
    }

    fn consume(&mut self, amount: usize) {
        self.inner.consume(amount);
        self.advance(amount);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    struct Count(Arc<Mutex<Vec<(String, u64, u64)>>>);
    struct CountTask(Arc<Mutex<Vec<(String, u64, u64)>>>, usize);

    impl Sink for Count {
        fn task(&self, what: &str, total: u64) -> Box<dyn Task> {
            let mut log = self.0.lock().unwrap();
            log.push((what.to_string(), total, 0));
            Box::new(CountTask(self.0.clone(), log.len() - 1))
        }
    }

    impl Task for CountTask {
        fn advance(&mut self, bytes: u64) {
            self.0.lock().unwrap()[self.1].2 += bytes;
        }
    }

    #[test]
    fn reads_are_counted_only_inside_a_scope() {
        let log = Arc::new(Mutex::new(Vec::new()));
        let mut outside = Tracked::new(&b"abc\n"[..], 4);
        std::io::copy(&mut outside, &mut std::io::sink()).unwrap();
        {
            let _scope = begin("verify", Arc::new(Count(log.clone())));
            let mut inside = Tracked::new(std::io::BufReader::new(&b"line 1\nline 2\n"[..]), 14);
            let mut line = String::new();
            while inside.read_line(&mut line).unwrap() > 0 {}
        }
        let after = Tracked::new(&b"x"[..], 1);
        assert!(after.task.is_none());
        assert_eq!(*log.lock().unwrap(), vec![("verify".to_string(), 14, 14)]);
    }
}
