//! AvgShedder as a placement strategy (5.0 rules, from the docs and PR #26246/#26609 text — the 5.0 Java code
//! was not available to read):
//! * a planned broker that is still a candidate is used, unless its score (`100 × W4`) is above the overload
//!   threshold and a healthy candidate (score at or below it) other than the source exists — then a random
//!   healthy one is used;
//! * a planned broker that is not a candidate any more is replaced by a random candidate other than the source;
//! * without a plan: a random candidate. (3.x/4.x hashed a fresh random int with CRC32 over the sorted
//!   candidates — uniform as well; loadmgr draws from the seeded RNG.)

use rand::rngs::StdRng;
use rand::Rng;

use super::PlacementContext;
use crate::core::num;

pub(super) fn select(
    ctx: &PlacementContext<'_>,
    candidates: &[usize],
    planned: Option<&str>,
    source: Option<&str>,
    rng: &mut StdRng,
) -> Option<(usize, String)> {
    let threshold = ctx
        .settings
        .load_balancer_broker_overloaded_threshold_percentage as f64;
    let score = |i: usize| ctx.brokers[i].w4 * 100.0;
    let not_source = |i: &usize| Some(ctx.brokers[*i].id) != source;
    if let Some(p) = planned {
        match ctx
            .index_of(p)
            .filter(|i| candidates.binary_search(i).is_ok())
        {
            Some(pi) => {
                if score(pi) > threshold {
                    let healthy: Vec<usize> = candidates
                        .iter()
                        .copied()
                        .filter(|i| *i != pi && not_source(i) && score(*i) <= threshold)
                        .collect();
                    if !healthy.is_empty() {
                        let pick = healthy[rng.random_range(0..healthy.len())];
                        return Some((
                            pick,
                            format!(
                                "AvgShedder: planned {p} score {} > overload threshold {}; replaced by {} (random among {} healthy eligible brokers)",
                                num(score(pi)),
                                num(threshold),
                                ctx.brokers[pick].id,
                                healthy.len()
                            ),
                        ));
                    }
                }
                Some((
                    pi,
                    format!(
                        "AvgShedder: planned destination {p} (score {})",
                        num(score(pi))
                    ),
                ))
            }
            None => {
                let others: Vec<usize> = candidates.iter().copied().filter(not_source).collect();
                if others.is_empty() {
                    return None;
                }
                let pick = others[rng.random_range(0..others.len())];
                Some((
                    pick,
                    format!(
                        "AvgShedder: planned {p} is not eligible; replaced by {} (random among {} eligible brokers other than the source)",
                        ctx.brokers[pick].id,
                        others.len()
                    ),
                ))
            }
        }
    } else {
        let pick = candidates[rng.random_range(0..candidates.len())];
        Some((
            pick,
            format!(
                "AvgShedder: no plan; {} is random among {} eligible brokers",
                ctx.brokers[pick].id,
                candidates.len()
            ),
        ))
    }
}
