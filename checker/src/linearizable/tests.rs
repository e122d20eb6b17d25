use super::*;
use crate::history::{Op, Operation, Outcome};
use rand::{Rng, SeedableRng};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester, SequentialSpec};

fn op(process: u32, op: Op, invoked_ns: u64, completed_ns: u64, outcome: Outcome) -> Operation {
    Operation::new(process, "k".into(), op, invoked_ns, completed_ns, outcome)
}

fn check(ops: &[Operation]) -> bool {
    match linearizability(&ops.iter().collect::<Vec<_>>()) {
        Verdict::Linearizable => true,
        Verdict::NotLinearizable => false,
        Verdict::Undecided => panic!("undecided"),
    }
}

const fn read(value: Option<u64>) -> Outcome {
    Outcome::Read { value }
}

#[test]
fn a_stale_read_after_a_completed_write_is_caught() {
    let fresh = [
        op(0, Op::Put { value: 1 }, 0, 10, Outcome::Done),
        op(1, Op::Get, 20, 30, read(Some(1))),
    ];
    assert!(check(&fresh));
    let stale = [
        op(0, Op::Put { value: 1 }, 0, 10, Outcome::Done),
        op(1, Op::Get, 20, 30, read(None)),
    ];
    assert!(!check(&stale));
    // Concurrent with the write, either answer is fine.
    let racing = [
        op(0, Op::Put { value: 1 }, 0, 10, Outcome::Done),
        op(1, Op::Get, 5, 30, read(None)),
    ];
    assert!(check(&racing));
}

#[test]
fn two_winners_of_one_precondition_are_caught() {
    let ops = [
        op(0, Op::Put { value: 1 }, 0, 1, Outcome::Done),
        op(
            1,
            Op::PutIfMatch {
                expected: 1,
                value: 2,
            },
            2,
            10,
            Outcome::Done,
        ),
        op(
            2,
            Op::PutIfMatch {
                expected: 1,
                value: 3,
            },
            2,
            10,
            Outcome::Done,
        ),
    ];
    assert!(!check(&ops));
    let ops = [
        op(1, Op::PutIfAbsent { value: 2 }, 2, 10, Outcome::Done),
        op(2, Op::PutIfAbsent { value: 3 }, 2, 10, Outcome::Done),
    ];
    assert!(!check(&ops));
}

#[test]
fn an_unanswered_write_may_land_late_or_never() {
    let late = [
        op(0, Op::Put { value: 1 }, 0, 5, Outcome::Unknown),
        op(1, Op::Get, 10, 20, read(None)),
        op(1, Op::Get, 30, 40, read(Some(1))),
    ];
    assert!(check(&late));
    let never = [
        op(0, Op::Put { value: 1 }, 0, 5, Outcome::Unknown),
        op(1, Op::Get, 10, 20, read(None)),
    ];
    assert!(check(&never));
    // Once seen, it cannot be unseen.
    let flicker = [
        op(0, Op::Put { value: 1 }, 0, 5, Outcome::Unknown),
        op(1, Op::Get, 10, 20, read(Some(1))),
        op(1, Op::Get, 30, 40, read(None)),
    ];
    assert!(!check(&flicker));
}

#[test]
fn a_lost_acknowledged_write_is_caught_and_shrunk() {
    let mut ops = vec![op(0, Op::Put { value: 1 }, 0, 10, Outcome::Done)];
    for i in 0..200u64 {
        ops.push(op(1, Op::Get, 20 + i * 10, 25 + i * 10, read(Some(1))));
    }
    ops.push(op(2, Op::Put { value: 2 }, 3000, 3010, Outcome::Done));
    ops.push(op(1, Op::Get, 4000, 4010, read(Some(1))));
    assert!(!check(&ops));
    let all: Vec<&Operation> = ops.iter().collect();
    let minimal = shrink(&all);
    let kinds: Vec<(Op, Outcome)> = minimal.iter().map(|o| (o.op, o.outcome)).collect();
    assert_eq!(
        kinds,
        [
            (Op::Put { value: 1 }, Outcome::Done),
            (Op::Put { value: 2 }, Outcome::Done),
            (Op::Get, read(Some(1))),
        ]
    );
}

#[test]
fn thousands_of_operations_are_rejected_quickly() {
    // Five processes race writes and reads on one key, all answered as a
    // real register would; then one stale read is planted at the end.
    let mut rng = rand::rngs::StdRng::seed_from_u64(7);
    let (ops, value) = register_history(&mut rng, 5, 4000);
    let mut ops = ops;
    assert!(check(&ops));
    let end = ops.iter().map(|o| o.completed_ns).max().unwrap();
    ops.push(op(99, Op::Get, end + 1, end + 2, read(Some(value / 2))));
    assert!(!check(&ops));
}

#[test]
fn a_search_past_its_limit_is_undecided_not_passed() {
    // Many unanswered writes on one key, then reads no order explains.
    let mut ops: Vec<Operation> = (0..40)
        .map(|i| {
            op(
                i,
                Op::Put {
                    value: u64::from(i) + 1,
                },
                0,
                1,
                Outcome::Unknown,
            )
        })
        .collect();
    for i in 0..40u64 {
        ops.push(op(
            100,
            Op::Get,
            10 + 2 * i,
            11 + 2 * i,
            read(Some(1000 + i)),
        ));
    }
    let all: Vec<&Operation> = ops.iter().collect();
    assert_eq!(Search::new(&all).run(10_000), Verdict::Undecided);
    // Five unanswered writes leave few enough states to decide.
    let few = [&all[..5], &all[40..41]].concat();
    assert_eq!(Search::new(&few).run(10_000), Verdict::NotLinearizable);
}

/// A history of `count` operations of a real register under `processes`
/// clients: each operation takes effect at one instant inside its interval.
fn register_history(rng: &mut impl Rng, processes: u32, count: usize) -> (Vec<Operation>, u64) {
    let mut state = None;
    let mut next_value = 1;
    let mut ops = Vec::new();
    let mut busy: Vec<Option<(Op, u64)>> = vec![None; processes as usize];
    let mut now = 0;
    while ops.len() < count {
        now += 1;
        let p = rng.gen_range(0..processes);
        match busy[p as usize].take() {
            None => {
                let op = if rng.gen_bool(0.5) {
                    next_value += 1;
                    Op::Put { value: next_value }
                } else {
                    Op::Get
                };
                busy[p as usize] = Some((op, now));
            }
            Some((op, invoked)) => {
                let outcome = match op {
                    Op::Put { value } => {
                        state = Some(value);
                        Outcome::Done
                    }
                    _ => read(state),
                };
                ops.push(Operation::new(p, "k".into(), op, invoked, now, outcome));
            }
        }
    }
    (ops, next_value)
}

/// The model, as stateright's reference object.
#[derive(Clone, Debug, Default, PartialEq)]
struct Reference(crate::model::State);

impl SequentialSpec for Reference {
    type Op = Op;
    type Ret = Outcome;

    /// Only reached for operations still in flight: their effect.
    fn invoke(&mut self, op: &Op) -> Outcome {
        if let Some(next) = step(self.0, *op, Outcome::Unknown) {
            self.0 = next;
        }
        Outcome::Unknown
    }

    fn is_valid_step(&mut self, op: &Op, ret: &Outcome) -> bool {
        match step(self.0, *op, *ret) {
            Some(next) => {
                self.0 = next;
                true
            }
            None => false,
        }
    }
}

/// stateright's verdict on the same history, its events fed in the order
/// this search sorts them.
fn reference_verdict(ops: &[Operation]) -> bool {
    let mut ends = Vec::new();
    for (i, o) in ops.iter().enumerate() {
        if o.op == Op::Get && o.outcome == Outcome::Unknown {
            continue;
        }
        ends.push((o.invoked_ns, 0u8, i));
        if o.outcome != Outcome::Unknown {
            ends.push((o.completed_ns, 1, i));
        }
    }
    ends.sort_unstable();
    let mut tester = LinearizabilityTester::new(Reference::default());
    for (_, is_return, i) in ends {
        let o = &ops[i];
        if is_return == 0 {
            tester.on_invoke(o.process, o.op).unwrap();
        } else {
            tester.on_return(o.process, o.outcome).unwrap();
        }
    }
    tester.is_consistent()
}

#[test]
fn verdicts_match_stateright_on_random_small_histories() {
    let mut rng = rand::rngs::StdRng::seed_from_u64(42);
    let (mut linearizable, mut not) = (0, 0);
    for _ in 0..3000 {
        let ops = random_history(&mut rng);
        let ours = check(&ops);
        assert_eq!(ours, reference_verdict(&ops), "{ops:#?}");
        if ours {
            linearizable += 1;
        } else {
            not += 1;
        }
    }
    assert!(linearizable > 300 && not > 300, "{linearizable} / {not}");
}

/// Up to 9 operations of 3 processes, each sequential, with answers drawn
/// at random from those some state could give.
fn random_history(rng: &mut impl Rng) -> Vec<Operation> {
    let mut ops = Vec::new();
    let mut value = 0;
    for process in 0..3u32 {
        let mut now = rng.gen_range(0..4u64);
        for _ in 0..rng.gen_range(1..4) {
            let took = rng.gen_range(1..6);
            let known = value.max(1);
            let some_value = |rng: &mut dyn rand::RngCore| {
                if rng.gen_bool(0.3) {
                    None
                } else {
                    Some(rng.gen_range(1..=known + 1))
                }
            };
            value += 1;
            let op = match rng.gen_range(0..5) {
                0 => Op::Put { value },
                1 => Op::PutIfAbsent { value },
                2 => Op::PutIfMatch {
                    expected: rng.gen_range(1..=known),
                    value,
                },
                3 => Op::Delete,
                _ => Op::Get,
            };
            let outcome = match (op, rng.gen_range(0..6)) {
                (_, 0) => Outcome::Unknown,
                (Op::Get, _) => read(some_value(rng)),
                (Op::PutIfAbsent { .. }, 1) | (Op::PutIfMatch { .. }, 1) => {
                    Outcome::PreconditionFailed
                }
                (Op::PutIfMatch { .. }, 2) => Outcome::NotFound,
                _ => Outcome::Done,
            };
            ops.push(Operation::new(
                process,
                "k".into(),
                op,
                now,
                now + took,
                outcome,
            ));
            if outcome == Outcome::Unknown {
                break;
            }
            now += took + rng.gen_range(1..3);
        }
    }
    ops
}
