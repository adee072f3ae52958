//! [`ConverterPool`]: the threads converters run on, bounded and apart from tokio's.
//!
//! A converter is a plain synchronous function that may take long, so it cannot run on the
//! runtime's workers; tokio's blocking pool is no home either: it grows to 512 threads, a
//! conversion cut by the handler timeout keeps its thread until it returns, and the same pool
//! serves `tokio::fs` (the CA-bundle reload among others), which a flood of slow conversions
//! would starve. Here each conversion gets a thread of its own while fewer than the bound run;
//! past it a conversion is refused at once (the caller answers that the pool is full). A
//! converter that outlives its request keeps its slot until it returns, so even stuck
//! converters never hold more threads than the bound.

use std::{panic::AssertUnwindSafe, sync::Arc};

use tokio::sync::{Semaphore, oneshot};

/// Why a conversion did not run.
#[derive(Debug, thiserror::Error)]
pub(crate) enum PoolError {
    /// Every thread of the pool is converting.
    #[error("all {max} converter threads are busy")]
    Full {
        /// The pool's bound.
        max: usize,
    },
    /// The operating system refused a new thread.
    #[error("starting a converter thread")]
    Spawn(#[source] std::io::Error),
    /// The converter panicked.
    #[error("the converter panicked")]
    Panicked,
}

/// At most `max` converter threads at once (see the [module docs](self)).
#[derive(Debug)]
pub(crate) struct ConverterPool {
    slots: Arc<Semaphore>,
    max: usize,
}

impl ConverterPool {
    /// A pool of at most `max` threads (at least 1).
    pub(crate) fn new(max: usize) -> Self {
        let max = max.max(1);
        Self {
            slots: Arc::new(Semaphore::new(max)),
            max,
        }
    }

    /// Runs `f` on a thread of the pool and awaits its result; refused at once when the pool
    /// is full. Dropping the future leaves `f` running to its end, in its slot.
    pub(crate) async fn run<T, F>(&self, f: F) -> Result<T, PoolError>
    where
        T: Send + 'static,
        F: FnOnce() -> T + Send + 'static,
    {
        let slot = self
            .slots
            .clone()
            .try_acquire_owned()
            .map_err(|_| PoolError::Full { max: self.max })?;
        let (tx, rx) = oneshot::channel();
        std::thread::Builder::new()
            .name("mcr-webhook-convert".into())
            .spawn(move || {
                let outcome = std::panic::catch_unwind(AssertUnwindSafe(f));
                // The slot frees once the converter has returned, answered or not.
                drop(slot);
                let _ = tx.send(outcome);
            })
            .map_err(PoolError::Spawn)?;
        match rx.await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(_)) | Err(_) => Err(PoolError::Panicked),
        }
    }

    /// Threads converting now.
    #[cfg(test)]
    fn busy(&self) -> usize {
        self.max - self.slots.available_permits()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn past_the_bound_a_conversion_is_refused_and_a_slot_frees_when_its_converter_returns() {
        let pool = Arc::new(ConverterPool::new(2));
        let (release, held) = std::sync::mpsc::channel::<()>();
        let held = Arc::new(std::sync::Mutex::new(held));
        let mut stuck = Vec::new();
        for _ in 0..2 {
            let (pool, held) = (pool.clone(), held.clone());
            stuck.push(tokio::spawn(async move {
                pool.run(move || {
                    let _ = held.lock().map(|rx| rx.recv());
                })
                .await
            }));
        }
        mcr_envtest::wait::eventually(
            "both slots taken",
            std::time::Duration::from_secs(30),
            || pool.busy() == 2,
        )
        .await;
        let refused = pool.run(|| 1).await;
        assert!(
            matches!(refused, Err(PoolError::Full { max: 2 })),
            "{refused:?}"
        );
        // Cut requests leave their converters running, in their slots.
        for task in &stuck {
            task.abort();
        }
        assert_eq!(pool.busy(), 2);
        drop(release);
        mcr_envtest::wait::eventually(
            "the slots to free",
            std::time::Duration::from_secs(30),
            || pool.busy() == 0,
        )
        .await;
        assert_eq!(pool.run(|| 7).await.unwrap(), 7);
        assert!(matches!(
            pool.run(|| panic!("boom")).await,
            Err(PoolError::Panicked)
        ));
        assert_eq!(pool.busy(), 0);
    }
}
