//! The election against a fake name server (the real one, in memory) and fake distributors,
//! and the dispatcher_node handlers (MS-FSCDFT 3.5.4) over encoded frames.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::election::{triple, Change, Cluster, Election, Fault, Role};
use super::ids::SessionIds;
use super::wire::{Guarantee, GuaranteeSet, Handled, MasterCall, Serving, CHEETAH_CHECKSUM};
use super::*;
use crate::frame::{self, Priority};
use crate::marshal::{Limits, Value};
use crate::nameserver::{Aor, Exception, NameServer, Triple};

/// Distributors sharing one in-memory name server. `hooks` run another node's tick at the
/// moment a node makes a call: how a test puts a race exactly where it wants it.
struct World {
    ns: NameServer,
    dead: HashSet<i64>,
    ns_down: bool,
    nodes: BTreeMap<i64, Option<Election>>,
    /// Node ids registered with each master (the fake master_dispatcher's list).
    registered: BTreeMap<i64, BTreeSet<i64>>,
    hooks: Vec<(i64, &'static str, i64)>,
    /// What each node serves, as it activated it.
    active: BTreeMap<i64, Serving>,
}

fn owner(object_id: &str) -> Option<i64> {
    object_id.split('/').nth(1)?.parse().ok()
}

impl World {
    fn new() -> World {
        World {
            ns: NameServer::in_memory(),
            dead: HashSet::new(),
            ns_down: false,
            nodes: BTreeMap::new(),
            registered: BTreeMap::new(),
            hooks: Vec::new(),
            active: BTreeMap::new(),
        }
    }

    fn add(&mut self, id: i64) {
        self.nodes
            .insert(id, Some(Election::new(id, "127.0.0.1", 13390 + id as u16)));
        self.dead.remove(&id);
    }

    /// One tick of node `id`'s check timer.
    fn tick(&mut self, id: i64) -> Change {
        let Some(mut e) = self.nodes.get_mut(&id).and_then(Option::take) else {
            return Change::None;
        };
        let change = e.on_check_timer(&mut View { w: self, me: id });
        match change {
            Change::BecameMaster => {
                self.registered.insert(id, BTreeSet::from([id]));
            }
            Change::Demoted(_) => {
                self.registered.remove(&id);
            }
            _ => {}
        }
        self.nodes.insert(id, Some(e));
        change
    }

    fn election(&self, id: i64) -> &Election {
        self.nodes[&id].as_ref().expect("not mid-step")
    }

    fn serving(&self, id: i64) -> Serving {
        if self.dead.contains(&id) {
            return Serving::default();
        }
        self.active.get(&id).copied().unwrap_or_default()
    }

    fn masters(&self) -> Vec<i64> {
        self.nodes
            .keys()
            .copied()
            .filter(|id| !self.dead.contains(id) && self.election(*id).role() == &Role::Master)
            .collect()
    }

    fn bound(&self, interface: (&str, &str)) -> Option<String> {
        self.ns
            .on_resolve(&triple(interface))
            .ok()
            .map(|v| Aor::from_value(&v, "r").expect("an AOR").object_id)
    }

    fn run_hooks(&mut self, me: i64, op: &'static str) {
        let due: Vec<i64> = self
            .hooks
            .iter()
            .filter(|h| h.0 == me && h.1 == op)
            .map(|h| h.2)
            .collect();
        self.hooks.retain(|h| !(h.0 == me && h.1 == op));
        for other in due {
            self.tick(other);
        }
    }
}

struct View<'a> {
    w: &'a mut World,
    me: i64,
}

impl View<'_> {
    fn reach(&self, object_id: &str) -> Result<i64, Fault> {
        match owner(object_id) {
            Some(n) if !self.w.dead.contains(&n) => Ok(n),
            _ => Err(Fault::Unreachable("refused".into())),
        }
    }
}

fn fault(r: crate::nameserver::Raised) -> Fault {
    if r.exception == Exception::Resolve {
        Fault::NotBound
    } else {
        Fault::Refused(r.to_string())
    }
}

impl Cluster for View<'_> {
    fn resolve(&mut self, t: &Triple) -> Result<Aor, Fault> {
        if self.w.ns_down {
            return Err(Fault::Unreachable("name server down".into()));
        }
        let v = self.w.ns.on_resolve(t).map_err(fault)?;
        Ok(Aor::from_value(&v, "r").expect("an AOR"))
    }
    fn bind(&mut self, aor: &Aor, replaces: Option<&str>) -> Result<(), Fault> {
        if aor.interface_type == SESSION_FACTORY.0 {
            self.w.run_hooks(self.me, "bind_factory");
        }
        if aor.interface_type == MASTER_DISPATCHER.0 {
            self.w.run_hooks(self.me, "bind_master");
        }
        if self.w.ns_down {
            return Err(Fault::Unreachable("name server down".into()));
        }
        self.w.ns.on_bind(aor, replaces).map(drop).map_err(fault)
    }
    fn unbind(&mut self, t: &Triple, object_id: &str) -> Result<(), Fault> {
        self.w.run_hooks(self.me, "unbind");
        if self.w.ns_down {
            return Err(Fault::Unreachable("name server down".into()));
        }
        self.w
            .ns
            .on_unbind(t, Some(object_id))
            .map(drop)
            .map_err(fault)
    }
    fn ping(&mut self, target: &Aor) -> Result<(), Fault> {
        let n = self.reach(&target.object_id)?;
        let s = self.w.serving(n);
        let up = match target.interface_type.as_str() {
            t if t == SESSION_FACTORY.0 => s.session_factory,
            t if t == MASTER_DISPATCHER.0 => s.master_dispatcher,
            _ => true,
        };
        up.then_some(())
            .ok_or(Fault::Refused("unknown_object".into()))
    }
    fn register_dispatcher(&mut self, master: &Aor, node_id: i64) -> Result<(), Fault> {
        let n = self.reach(&master.object_id)?;
        if !self.w.serving(n).master_dispatcher {
            return Err(Fault::Refused("unknown_object".into()));
        }
        self.w.registered.entry(n).or_default().insert(node_id);
        Ok(())
    }
    fn list_dispatchers(&mut self, master: &Aor) -> Result<Vec<i64>, Fault> {
        let n = self.reach(&master.object_id)?;
        Ok(self
            .w
            .registered
            .get(&n)
            .map_or(Vec::new(), |s| s.iter().copied().collect()))
    }
    fn node_status(&mut self, node: &Aor) -> Result<(i64, Vec<i64>), Fault> {
        self.reach(&node.object_id).map(|_| (0, Vec::new()))
    }
    fn activate(&mut self, serving: Serving) {
        self.w.active.insert(self.me, serving);
    }
}

fn started(n: i64) -> World {
    let mut w = World::new();
    for id in 1..=n {
        w.add(id);
        w.tick(id);
    }
    w
}

#[test]
fn three_started_one_by_one_make_one_master_and_two_registered_backups() {
    // MS-FSCDFT 3, figures 2 and 3.
    let w = started(3);
    assert_eq!(w.masters(), vec![1]);
    assert_eq!(
        w.bound(SESSION_FACTORY).as_deref(),
        Some("dispatcher/1/session_factory")
    );
    assert_eq!(
        w.bound(MASTER_DISPATCHER).as_deref(),
        Some("dispatcher/1/master_dispatcher")
    );
    for id in 1..=3 {
        let t = Triple {
            name: dispatcher_node_name(id),
            interface_type: DISPATCHER_NODE.0.into(),
            interface_version: DISPATCHER_NODE.1.into(),
        };
        assert!(
            w.ns.on_resolve(&t).is_ok(),
            "dispatcher_node {id} bound (3.5.3)"
        );
    }
    assert_eq!(w.registered[&1], BTreeSet::from([1, 2, 3]));
    for id in [2, 3] {
        assert!(matches!(
            w.election(id).role(),
            Role::Backup {
                registered: Some(_),
                ..
            }
        ));
    }
    // The master keeps its own proxy (3.1.4.1).
    assert!(w.election(1).registry().contains_key(&1));
}

#[test]
fn a_backup_takes_over_only_after_three_failed_pings_and_a_fourth_on_the_resolved_master() {
    let mut w = started(2);
    w.dead.insert(1);
    assert_eq!(w.tick(2), Change::None);
    assert_eq!(w.tick(2), Change::None);
    assert_eq!(w.election(2).failures(), 2);
    assert_eq!(
        w.bound(SESSION_FACTORY).as_deref(),
        Some("dispatcher/1/session_factory")
    );
    assert_eq!(
        w.tick(2),
        Change::BecameMaster,
        "the third failure takes over (3.4.5)"
    );
    assert_eq!(
        w.bound(SESSION_FACTORY).as_deref(),
        Some("dispatcher/2/session_factory")
    );
    assert_eq!(
        w.bound(MASTER_DISPATCHER).as_deref(),
        Some("dispatcher/2/master_dispatcher")
    );
}

#[test]
fn a_failed_ping_then_a_good_one_resets_the_count() {
    let mut w = started(2);
    w.dead.insert(1);
    w.tick(2);
    w.tick(2);
    w.dead.remove(&1);
    w.tick(2);
    assert_eq!(w.election(2).failures(), 0);
    w.dead.insert(1);
    w.tick(2);
    w.tick(2);
    assert!(matches!(w.election(2).role(), Role::Backup { .. }));
}

#[test]
fn after_the_master_dies_the_other_backup_registers_with_the_new_one() {
    let mut w = started(3);
    w.dead.insert(1);
    for _ in 0..3 {
        w.tick(2);
        w.tick(3);
    }
    assert_eq!(w.masters(), vec![2]);
    assert_eq!(w.registered[&2], BTreeSet::from([2, 3]));
    // The old master comes back with its state lost: it becomes a backup (3, figure 3).
    w.add(1);
    w.tick(1);
    assert_eq!(w.masters(), vec![2]);
    assert_eq!(w.registered[&2], BTreeSet::from([1, 2, 3]));
}

/// Kills the master `rounds` times in a row; after each, exactly one master, every live node
/// registered with it.
#[test]
fn repeated_kills_leave_exactly_one_master_each_time() {
    let mut w = started(3);
    for _ in 0..3 {
        let old = w.masters()[0];
        w.dead.insert(old);
        for _ in 0..4 {
            for id in 1..=3 {
                if id != old {
                    w.tick(id);
                }
            }
        }
        let m = w.masters();
        assert_eq!(m.len(), 1, "{m:?}");
        w.add(old);
        w.tick(old);
        for id in 1..=3 {
            w.tick(id);
        }
        assert_eq!(w.masters(), m);
        assert_eq!(w.registered[&m[0]], BTreeSet::from([1, 2, 3]));
    }
}

fn both_backups_at_two_failures() -> World {
    let mut w = started(3);
    w.dead.insert(1);
    for _ in 0..2 {
        w.tick(2);
        w.tick(3);
    }
    w
}

#[test]
fn two_backups_racing_where_the_late_one_unbinds_end_with_one_master() {
    // Node 3 resolved the dead master; node 2 takes over before node 3's unbind arrives,
    // which names the dead object and so cannot remove node 2's fresh binding.
    let mut w = both_backups_at_two_failures();
    w.hooks.push((3, "unbind", 2));
    w.tick(3);
    assert_eq!(w.masters(), vec![2]);
    assert!(matches!(
        w.election(3).role(),
        Role::Backup {
            registered: Some(_),
            ..
        }
    ));
    assert_eq!(w.registered[&2], BTreeSet::from([2, 3]));
}

#[test]
fn two_backups_racing_between_unbind_and_bind_end_with_one_master() {
    // Node 3 unbinds the dead master; node 2 finds nothing bound and binds first; node 3's
    // bind is refused and it follows node 2 (3.4.3).
    let mut w = both_backups_at_two_failures();
    w.hooks.push((3, "bind_factory", 2));
    w.tick(3);
    assert_eq!(w.masters(), vec![2]);
    assert_eq!(
        w.bound(SESSION_FACTORY).as_deref(),
        Some("dispatcher/2/session_factory")
    );
    assert!(matches!(w.election(3).role(), Role::Backup { .. }));
    w.tick(3);
    assert_eq!(w.registered[&2], BTreeSet::from([2, 3]));
}

#[test]
fn a_racer_that_finds_the_winner_mid_take_over_follows_it() {
    // Node 3 looks while node 2 has bound session_factory but not yet master_dispatcher: the
    // fresh session_factory already answers (activated before the bind), so node 3 follows
    // it instead of taking it over too.
    let mut w = both_backups_at_two_failures();
    w.hooks.push((2, "bind_master", 3));
    assert_eq!(w.tick(2), Change::BecameMaster);
    assert_eq!(w.masters(), vec![2]);
    match w.election(3).role() {
        Role::Backup { factory, .. } => {
            assert_eq!(factory.object_id, "dispatcher/2/session_factory")
        }
        other => panic!("{other:?}"),
    }
    w.tick(3);
    assert_eq!(w.masters(), vec![2]);
    assert_eq!(w.registered[&2], BTreeSet::from([2, 3]));
}

#[test]
fn a_master_whose_factory_was_taken_over_demotes_itself_and_registers() {
    // 3.3.5: node 1 was only slow; node 2 took over meanwhile.
    let mut w = both_backups_at_two_failures();
    w.tick(2);
    assert_eq!(w.masters(), vec![2]);
    w.dead.remove(&1);
    assert!(matches!(w.tick(1), Change::Demoted(_)));
    assert!(
        !w.election(1).serving().session_factory,
        "a demoted master stops serving it"
    );
    assert_eq!(w.masters(), vec![2]);
    assert!(w.registered[&2].contains(&1));
}

#[test]
fn an_unreachable_name_server_demotes_no_one_and_elects_no_one() {
    let mut w = started(2);
    w.ns_down = true;
    for _ in 0..5 {
        w.tick(1);
        w.tick(2);
    }
    assert_eq!(w.masters(), vec![1]);
    let mut fresh = World::new();
    fresh.ns_down = true;
    fresh.add(7);
    fresh.tick(7);
    assert_eq!(fresh.election(7).role(), &Role::Undecided);
}

#[test]
fn a_name_server_that_lost_its_bindings_gets_them_back() {
    let mut w = started(2);
    w.ns = NameServer::in_memory();
    w.tick(1);
    assert_eq!(
        w.bound(SESSION_FACTORY).as_deref(),
        Some("dispatcher/1/session_factory")
    );
    assert_eq!(
        w.bound(MASTER_DISPATCHER).as_deref(),
        Some("dispatcher/1/master_dispatcher")
    );
}

#[test]
fn a_backup_the_master_dropped_registers_again() {
    let mut w = started(2);
    w.registered.get_mut(&1).unwrap().remove(&2);
    assert!(matches!(w.tick(2), Change::RegisteredWith(_)));
    assert!(w.registered[&1].contains(&2));
}

// ---- dispatcher_node over frames (MS-FSCDFT 3.5.4) ----

fn request(object: &str, method: &str, id: i64, args: Vec<(&str, Value<'static>)>) -> Vec<u8> {
    let k = |s: &str| Value::owned_bytes(s.as_bytes().to_vec());
    let args = Value::Dict(args.into_iter().map(|(a, v)| (k(a), v)).collect());
    let dict = vec![
        (k("object"), k(object)),
        (k("method"), k(method)),
        (k("id"), Value::int(id)),
        (k("args"), args),
    ];
    let mut out = Vec::new();
    frame::encode_dict(&dict, Priority::Normal, &mut out);
    out.split_off(frame::HEADER_LEN)
}

fn node() -> DispatcherNode {
    DispatcherNode::new(4, "127.0.0.1", 13000, &["web".to_string()])
}

fn answer(n: &mut DispatcherNode, body: &[u8]) -> (Result<Value<'static>, Exception>, bool) {
    match n.handle_frame(body, &Limits::default(), Serving::default(), "backup") {
        Handled::Answer(a) => (a.reply.outcome.map_err(|r| r.exception), a.close.is_some()),
        Handled::Forward { call, .. } => panic!("forwarded {call:?}"),
        Handled::Feed(f) => panic!("fed {f:?}"),
    }
}

fn spec_args(
    id: i64,
    coll: &str,
    g: GuaranteeSet,
    priority: i64,
    ext: bool,
) -> Vec<(&'static str, Value<'static>)> {
    vec![
        ("id", Value::int(id)),
        ("collection", Value::owned_bytes(coll.as_bytes().to_vec())),
        ("guarantees", g.to_value()),
        ("priority", Value::int(priority)),
        ("external_client", Value::Bool(ext)),
    ]
}

fn port_of(v: &Value<'_>) -> u16 {
    Aor::from_value(v, "r").expect("a session proxy").port
}

const DN: &str = "dispatcher/4/dispatcher_node";

#[test]
fn create_places_sessions_on_base_plus_390_or_391() {
    let mut n = node();
    let fp0 = GuaranteeSet(vec![Guarantee::FeedingPriority(0)]);
    let (r, _) = answer(
        &mut n,
        &request(DN, "create", 1, spec_args(10, "web", fp0.clone(), 0, false)),
    );
    assert_eq!(port_of(&r.unwrap()), 13390);
    let (r, _) = answer(
        &mut n,
        &request(
            DN,
            "create",
            2,
            spec_args(11, "web", GuaranteeSet::default(), 0, true),
        ),
    );
    assert_eq!(port_of(&r.unwrap()), 13391);
    let mut a = spec_args(12, "web", fp0, 0, true);
    a.push(("callback", Value::None));
    let (r, _) = answer(&mut n, &request(DN, "create_session", 3, a));
    assert_eq!(
        port_of(&r.unwrap()),
        13390,
        "create_session is always on + 390 (3.5.4.1)"
    );
    let (r, _) = answer(&mut n, &request(DN, "get_sessions", 4, vec![]));
    assert_eq!(
        r.unwrap(),
        Value::List(vec![Value::int(10), Value::int(11), Value::int(12)])
    );
    // recreate of a held id returns it as it is (external, + 391); of an unknown id creates.
    let (r, _) = answer(
        &mut n,
        &request(
            DN,
            "recreate",
            5,
            spec_args(11, "web", GuaranteeSet::default(), 0, false),
        ),
    );
    assert_eq!(port_of(&r.unwrap()), 13391);
    let (r, _) = answer(
        &mut n,
        &request(
            DN,
            "recreate",
            6,
            spec_args(13, "web", GuaranteeSet::default(), 0, false),
        ),
    );
    assert_eq!(port_of(&r.unwrap()), 13390);
    let (r, _) = answer(
        &mut n,
        &request(DN, "destroy_session", 7, vec![("id", Value::int(10))]),
    );
    assert_eq!(r.unwrap(), Value::None);
    let (r, _) = answer(
        &mut n,
        &request(
            DN,
            "remove_sessions",
            8,
            vec![("coll", Value::bytes(b"web"))],
        ),
    );
    assert_eq!(
        r.unwrap(),
        Value::List(vec![Value::int(11), Value::int(12), Value::int(13)])
    );
    let (r, _) = answer(&mut n, &request(DN, "get_load", 9, vec![]));
    assert_eq!(r.unwrap(), Value::int(0));
}

#[test]
fn only_the_two_exceptions_of_3_5_4_and_they_keep_the_connection() {
    let mut n = node();
    let (r, close) = answer(
        &mut n,
        &request(
            DN,
            "create",
            1,
            spec_args(1, "news", GuaranteeSet::default(), 0, false),
        ),
    );
    assert_eq!(
        (r.unwrap_err(), close),
        (Exception::UnknownCollection, false)
    );
    for (g, p) in [
        (GuaranteeSet(vec![Guarantee::FeedingPriority(1)]), 0),
        (GuaranteeSet(vec![Guarantee::FeedingPriority(0)]), 1),
        (GuaranteeSet::default(), -1),
        (GuaranteeSet(vec![Guarantee::Plain]), 0),
        (GuaranteeSet(vec![Guarantee::FeedingPriority(0); 2]), 0),
    ] {
        for m in ["create", "recreate", "create_session"] {
            let (r, close) = answer(
                &mut n,
                &request(DN, m, 1, spec_args(1, "web", g.clone(), p, false)),
            );
            assert_eq!(
                (r.unwrap_err(), close),
                (Exception::UnsupportedGuaranteeSet, false),
                "{m} {g:?} {p}"
            );
        }
    }
}

#[test]
fn malformed_calls_are_answered_and_closed() {
    let mut n = node();
    let mut bad_checksum = GuaranteeSet::default().to_value();
    if let Value::Dict(d) = &mut bad_checksum {
        d[1].1 = Value::int(CHEETAH_CHECKSUM + 1);
    }
    let mut a = spec_args(1, "web", GuaranteeSet::default(), 0, false);
    a[2].1 = bad_checksum;
    let cases = [
        (request(DN, "create", 1, a), Exception::BadRequest),
        (
            request(DN, "destroy_session", 1, vec![("id", Value::int(-1))]),
            Exception::BadRequest,
        ),
        (
            request(DN, "get_load", 1, vec![]).split_off(3),
            Exception::BadFrame,
        ),
        (request(DN, "fly", 1, vec![]), Exception::UnknownMethod),
        (
            request("dispatcher/4/session_factory", "__ping", 1, vec![]),
            Exception::UnknownObject,
        ),
        (
            request("dispatcher/5/dispatcher_node", "__ping", 1, vec![]),
            Exception::UnknownObject,
        ),
    ];
    for (body, want) in cases {
        let (r, close) = answer(&mut n, &body);
        assert_eq!((r.unwrap_err(), close), (want, true));
    }
}

#[test]
fn master_calls_are_forwarded_only_while_serving() {
    let mut n = node();
    let serving = Serving {
        session_factory: true,
        master_dispatcher: true,
    };
    let body = request(
        "dispatcher/4/master_dispatcher",
        "register_dispatcher",
        3,
        vec![("node_id", Value::int(9))],
    );
    assert_eq!(
        n.handle_frame(&body, &Limits::default(), serving, "master"),
        Handled::Forward {
            id: 3,
            call: MasterCall::RegisterDispatcher(9)
        }
    );
    let (r, close) = answer(&mut n, &body);
    assert_eq!((r.unwrap_err(), close), (Exception::UnknownObject, true));
    let ping = request("dispatcher/4/session_factory", "__ping", 4, vec![]);
    match n.handle_frame(&ping, &Limits::default(), serving, "master") {
        Handled::Answer(a) => assert_eq!(a.reply.outcome, Ok(Value::Bool(true))),
        other => panic!("{other:?}"),
    }
}

#[test]
fn guarantee_sets_round_trip_in_the_cheetah_encoding() {
    let g = GuaranteeSet(vec![Guarantee::FeedingPriority(0), Guarantee::Plain]);
    assert_eq!(GuaranteeSet::from_value(&g.to_value(), "g"), Ok(g));
}

#[test]
fn session_ids_stay_unique_across_a_restart_and_across_nodes() {
    let dir = tempfile::tempdir().unwrap();
    let mut seen = HashSet::new();
    for _ in 0..3 {
        let mut ids = SessionIds::open(dir.path(), 2).unwrap();
        for _ in 0..5 {
            assert!(seen.insert(ids.next_id().unwrap()));
        }
    }
    let mut other = SessionIds::in_memory(3);
    for _ in 0..20 {
        let id = other.next_id().unwrap();
        assert_eq!(id & 0xFFFF, 3);
        assert!(seen.insert(id));
    }
}

#[test]
fn the_collection_holder_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let mut n = DispatcherNode::open(dir.path(), 1, "h", 1, &["a".into()]).unwrap();
    assert_eq!(n.on_add_collection("b"), Ok(Value::None));
    let n = DispatcherNode::open(dir.path(), 1, "h", 1, &[]).unwrap();
    assert_eq!(n.collections().collect::<Vec<_>>(), vec!["a", "b"]);
}
