//! Timers fire, repeating timers repeat, cancelled timers do not fire, replaced timers move.

use std::time::Duration;

use crawlfleet_net::{Event, EventLoop, TimerId};
use crossbeam_channel::Receiver;

use crate::util;

const ONE_SHOT: TimerId = TimerId(1);
const REPEAT: TimerId = TimerId(2);
const BARRIER: TimerId = TimerId(3);
const CANCELLED: TimerId = TimerId(4);
const LATER: TimerId = TimerId(5);
const MOVED: TimerId = TimerId(6);

fn next_timer(events: &Receiver<Event>) -> TimerId {
    match util::next_event(events) {
        Event::Timer(id) => id,
        other => panic!("unexpected {other:?}"),
    }
}

/// No event arrives for `d` (used only after the loop has shown it processed everything that
/// could produce one: a missing event passes, an extra one fails).
fn quiet_for(events: &Receiver<Event>, d: Duration) {
    if let Ok(ev) = events.recv_timeout(d) {
        panic!("unexpected {ev:?}");
    }
}

#[test]
fn one_shot_and_repeating_timers_fire() {
    util::init_logs();
    let lp = EventLoop::builder().spawn().unwrap();
    let h = &lp.handle;
    h.set_timer(ONE_SHOT, Duration::from_millis(10), None)
        .unwrap();
    h.set_timer(
        REPEAT,
        Duration::from_millis(5),
        Some(Duration::from_millis(5)),
    )
    .unwrap();
    let (mut one_shot, mut repeats) = (0, 0);
    while repeats < 5 || one_shot == 0 {
        match next_timer(&lp.events) {
            ONE_SHOT => one_shot += 1,
            REPEAT => repeats += 1,
            other => panic!("unexpected {other}"),
        }
    }
    h.cancel_timer(REPEAT).unwrap();
    // Commands run in order: once BARRIER fires, REPEAT is cancelled; any REPEAT after is a bug.
    h.set_timer(BARRIER, Duration::ZERO, None).unwrap();
    loop {
        match next_timer(&lp.events) {
            BARRIER => break,
            REPEAT => {}
            other => panic!("unexpected {other}"),
        }
    }
    assert_eq!(one_shot, 1);
    quiet_for(&lp.events, Duration::from_millis(50));
    util::stop(lp);
}

#[test]
fn cancelled_timer_does_not_fire_and_replaced_timer_moves() {
    util::init_logs();
    let lp = EventLoop::builder().spawn().unwrap();
    let h = &lp.handle;
    // Cancelled long before its deadline: it must not fire, before or after LATER.
    h.set_timer(CANCELLED, Duration::from_millis(300), None)
        .unwrap();
    h.cancel_timer(CANCELLED).unwrap();
    // Set far away, then moved close: fires once, at the new time.
    h.set_timer(MOVED, Duration::from_secs(3600), None).unwrap();
    h.set_timer(MOVED, Duration::from_millis(20), None).unwrap();
    h.set_timer(LATER, Duration::from_millis(400), None)
        .unwrap();
    assert_eq!(next_timer(&lp.events), MOVED);
    assert_eq!(next_timer(&lp.events), LATER);
    quiet_for(&lp.events, Duration::from_millis(100));
    util::stop(lp);
}
