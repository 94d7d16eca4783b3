//! Stop requests from the operator: SIGINT (Ctrl-C) and SIGTERM.

use std::future::Future;

/// A future that resolves at the first SIGINT or SIGTERM this process receives. The
/// handlers are installed when this is called, not when the future is first polled, so a
/// signal that arrives in between is not lost (nor does it kill the process uncleanly).
pub fn stop_requested() -> impl Future<Output = ()> {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        let interrupt = signal(SignalKind::interrupt());
        let terminate = signal(SignalKind::terminate());
        async move {
            match (interrupt, terminate) {
                (Ok(mut interrupt), Ok(mut terminate)) => {
                    tokio::select! {
                        _ = interrupt.recv() => {}
                        _ = terminate.recv() => {}
                    }
                }
                (interrupt, terminate) => {
                    let error = interrupt.err().or(terminate.err());
                    eprintln!(
                        "warning: cannot watch SIGINT/SIGTERM ({error:?}); stopping on Ctrl-C only"
                    );
                    let _ = tokio::signal::ctrl_c().await;
                }
            }
        }
    }
    #[cfg(not(unix))]
    {
        async {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
