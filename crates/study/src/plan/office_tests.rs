//! The users search resolved: which cells it searches, what every DAV target is started
//! with, how long it is expected to take, and the errors of its keys.

use std::time::Duration;

use super::tests::plan;
use super::*;

const OFFICE: &str = r#"
name = "office"
[[target]]
name = "builtin"
kind = "builtin"
dav = true
[[target]]
name = "radicale"
kind = "radicale"
[[workload]]
name = "ab"
paths = ["/x"]
targets = ["builtin"]
[[workload]]
name = "search"
kind = "caldav"
users = "search"
[[workload]]
name = "sweep"
kind = "caldav"
users = [5, 300]
targets = ["radicale"]
[search]
start_users = 4
max_users = 64
[steps]
duration = "10s"
"#;

#[test]
fn a_users_search_is_one_cell_per_target_after_the_swept_cells() {
    let p = plan(OFFICE).unwrap();
    let searched = p.searched_cells();
    assert_eq!(searched.len(), 2, "one searched cell per target");
    // The swept cells come first and the sweep's schedule covers only them.
    assert_eq!(searched, [p.cells.len() - 2, p.cells.len() - 1]);
    assert_eq!(p.steps.len(), p.cells.len() - 2);
    assert!(p.steps.iter().all(|s| !searched.contains(&s.cell)));
    let sp = p.users_search.as_ref().unwrap();
    assert_eq!(sp.start_rate, 4.0);
    assert!(sp.opts.whole);
    assert_eq!(sp.opts.max_rate_rps, 64.0);
    assert!(p.search.is_none(), "a sweep has no rate search");
    // A step of the search plays the users it is given, and offers no rate.
    let (cell, rate) = p.cell_at(searched[0], Some(16.0));
    assert_eq!((cell.users, cell.concurrency, rate), (Some(16), 16, None));
    // A swept office cell keeps its users.
    let swept = p.cells.iter().position(|c| c.users == Some(300)).unwrap();
    assert_eq!(p.cell_at(swept, None).0.users, Some(300));
    // Accounts: the most a workload on the target asks for.
    let t = |n: &str| p.targets.iter().position(|t| t.name == n).unwrap();
    assert_eq!(p.dav_users(t("builtin")), Some(64));
    assert_eq!(p.dav_users(t("radicale")), Some(300));
    // The estimate counts the searches' days: more than the sweep alone.
    let sweep_only = p.remaining_estimate(&p.steps, &RateBook::default());
    let per_search = p.cell_search_steps(searched[0]);
    assert!(per_search >= 3, "{per_search}");
    let searches: Duration = searched
        .iter()
        .map(|ci| p.step_estimate(&p.cells[*ci]) * per_search)
        .sum();
    // ... and the targets' starts: 64 accounts on the built-in server at 60 ms each,
    // 300 Radicale calendars at 40 ms each (the accounts above, nothing else).
    let start = Duration::from_millis(64 * 60 + 300 * 40);
    assert_eq!(p.target_start_total(), start);
    assert_eq!(p.estimate(), sweep_only + searches + start);
    // An office day lasts its duration even in a search, plus its set-up and lead-in
    // (at the mean of the search's first two counts, 4 and 8 users).
    let untimed = p.office_untimed(&p.cells[searched[0]]);
    assert!(untimed > Duration::ZERO);
    assert_eq!(
        p.step_estimate(&p.cells[searched[0]]),
        Duration::from_secs(10) + p.timing.warmup + p.timing.cooldown + untimed
    );
    // Twice the people, twice the untimed time.
    let (at300, _) = p.cell_at(swept, None);
    let (at150, _) = (
        Cell {
            users: Some(150),
            ..at300.clone()
        },
        (),
    );
    let ratio = p.office_untimed(&at300).as_secs_f64() / p.office_untimed(&at150).as_secs_f64();
    assert!((ratio - 2.0).abs() < 1e-6, "{ratio}");
}

#[test]
fn search_mode_searches_every_office_and_the_rates_of_the_rest() {
    let text = OFFICE
        .replace("name = \"office\"", "name = \"office\"\nmode = \"search\"")
        .replace("users = [5, 300]\n", "");
    let p = plan(&text).unwrap();
    assert_eq!(p.searched_cells().len(), p.cells.len());
    assert!(p.steps.is_empty());
    let ab = p.cells.iter().position(|c| c.users.is_none()).unwrap();
    assert!(!p.searches_users(ab));
    assert_eq!(p.search_of(ab), p.search.as_ref());
    let office = p.cells.iter().position(|c| c.users.is_some()).unwrap();
    assert_eq!(p.search_of(office), p.users_search.as_ref());
}

#[test]
fn users_search_keys_are_checked_and_name_what_is_wrong() {
    let cases = [
        (
            OFFICE.replace("users = \"search\"", "users = \"lots\""),
            "users must be a count, a list of counts or \"search\", got \"lots\"",
        ),
        (
            OFFICE.replace("name = \"office\"", "name = \"office\"\nmode = \"search\""),
            "in search mode a caldav workload searches its users",
        ),
        (
            OFFICE.replace("users = \"search\"", "users = [1]"),
            "start_users/max_users need a caldav workload with users = \"search\"",
        ),
        (
            OFFICE.replace("max_users = 64", "max_users = 2"),
            "1 <= start_users <= max_users, got 4 and 2",
        ),
        (
            OFFICE.replace("start_users = 4", "start_users = 0"),
            "1 <= start_users <= max_users",
        ),
        (
            OFFICE.replace("users = \"search\"\n", ""),
            "needs users (a count, a list, or \"search\")",
        ),
    ];
    for (text, want) in cases {
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(want), "want {want:?}, got {e:?}");
        assert!(!e.contains('\n'), "one line: {e}");
    }
}

#[test]
fn a_workload_may_search_its_own_range_of_users() {
    let text = OFFICE.replace(
        "users = \"search\"\n",
        "users = \"search\"\nstart_users = 2\nmax_users = 16\ntargets = [\"radicale\"]\n",
    );
    let text = text.replace(
        "[search]",
        "[[workload]]\nname = \"wide\"\nkind = \"caldav\"\nusers = \"search\"\ntargets = [\"builtin\"]\n[search]",
    );
    let p = plan(&text).unwrap();
    let searched = p.searched_cells();
    let of = |name: &str| {
        let ci = *searched
            .iter()
            .find(|&&ci| p.workloads[p.cells[ci].workload].name == name)
            .unwrap();
        let s = p.search_of(ci).unwrap();
        (p.cells[ci].users, s.start_rate, s.opts.max_rate_rps)
    };
    assert_eq!(of("search"), (Some(2), 2.0, 16.0), "its own range");
    assert_eq!(of("wide"), (Some(4), 4.0, 64.0), "the study's [search]");
    // Accounts: the most each target's search tries (Radicale's sweep asks 300).
    let t = |n: &str| p.targets.iter().position(|t| t.name == n).unwrap();
    assert_eq!(p.dav_users(t("builtin")), Some(64));
    assert_eq!(p.dav_users(t("radicale")), Some(300));
    let d = p.describe();
    assert!(
        d.contains("from 2 users") && d.contains("at most 16 users"),
        "{d}"
    );
    assert!(
        d.contains("from 4 users") && d.contains("at most 64 users"),
        "{d}"
    );
    // The keys mean nothing on swept users or an http workload.
    for (text, want) in [
        (
            OFFICE.replace("users = [5, 300]\n", "users = [5, 300]\nmax_users = 9\n"),
            "start_users/max_users are for users = \"search\"",
        ),
        (
            OFFICE.replace("paths = [\"/x\"]\n", "paths = [\"/x\"]\nstart_users = 3\n"),
            "start_users is a caldav key",
        ),
    ] {
        let e = plan(&text).unwrap_err().to_string();
        assert!(e.contains(want), "want {want:?}, got {e:?}");
    }
}

/// Issue 28: a scaled window lets only a share of the devices poll; the plan says which
/// share and the window that gives every device a few polls. No clock: the plan's
/// arithmetic on the window, the pace and the mix's slowest poll interval (Thunderbird's
/// 30 min in the default mix).
#[test]
fn the_plan_says_what_share_of_devices_polls_in_a_short_window() {
    use super::describe::{poll_note, polls_per_device};
    let p = plan(OFFICE).unwrap();
    let base = p.workloads.iter().find_map(|w| w.office.clone()).unwrap();
    assert_eq!(base.mix.slowest_poll_s(), 1800.0);
    let share = |pc: &'static str| -> Option<String> {
        Some(format!(
            "only about {pc}% of the slowest-polling devices poll in it"
        ))
    };
    // (window s, compress, polls per device, the note's words; None: no note)
    let rows: [(u64, f64, f64, Option<String>); 6] = [
        (90, 1.0, 0.05, share("5")),
        (900, 1.0, 0.5, share("50")),
        (
            1800,
            1.0,
            1.0,
            Some("the slowest-polling devices poll about 1.0 times in it".into()),
        ),
        (5400, 1.0, 3.0, None),
        (7200, 1.0, 4.0, None),
        // A compressed day polls F times as often: 90 s at 60x is 3 polls.
        (90, 60.0, 3.0, None),
    ];
    for (window, compress, polls, words) in rows {
        let o = super::OfficeLoad {
            compress,
            ..base.clone()
        };
        let w = Duration::from_secs(window);
        assert!((polls_per_device(&o, w) - polls).abs() < 1e-9, "{window} s");
        let note = poll_note(&o, w);
        match words {
            None => assert_eq!(note, None, "{window} s at {compress}x"),
            Some(words) => {
                let note = note.unwrap();
                assert!(note.contains(&words), "{note}");
                assert!(note.contains("1h30m gives every device 3"), "{note}");
            }
        }
    }
}

#[test]
fn radicales_seeded_set_up_is_counted_as_a_read_back_not_as_puts() {
    // Radicale's calendars and first items are written into its storage before it
    // starts, so its set-up only reads each calendar back (about 4 requests a person);
    // elsewhere set-up writes the 20 items one PUT each. The lead-in is the same.
    let text = OFFICE.replace(
        "targets = [\"radicale\"]",
        "targets = [\"builtin\", \"radicale\"]",
    );
    let p = plan(&text).unwrap();
    let office = p.workloads.iter().find_map(|w| w.office.as_ref()).unwrap();
    let (radicale, r_lead) =
        estimate::untimed_requests(office, volley_targets::TargetKind::Radicale);
    let (builtin, b_lead) = estimate::untimed_requests(office, volley_targets::TargetKind::Builtin);
    assert_eq!(radicale, estimate::SEEDED_SET_UP);
    assert_eq!(builtin, 4.0 + volley_office::INITIAL_ITEMS as f64);
    assert_eq!(r_lead, b_lead);
    // A day of 300 people: each cell's untimed time is its requests at its server's rate.
    let day = |target: &str| {
        let ci = p
            .cells
            .iter()
            .position(|c| {
                c.users == Some(300) && p.targets[p.instances[c.instance].target].name == target
            })
            .unwrap();
        p.office_untimed(&p.cells[ci]).as_secs_f64()
    };
    let want = |set_up: f64, kind| 300.0 * (set_up + r_lead) / estimate::untimed_rps(kind);
    let r = day("radicale");
    assert!(
        (r - want(radicale, volley_targets::TargetKind::Radicale)).abs() < 1e-6,
        "{r}"
    );
    let b = day("builtin");
    assert!(
        (b - want(builtin, volley_targets::TargetKind::Builtin)).abs() < 1e-6,
        "{b}"
    );
    // The plan's header says both figures.
    let header = p.describe();
    assert!(
        header.contains(&format!("{} on Radicale", (radicale + r_lead).round())),
        "{header}"
    );
}
