//! Fuzz target: arbitrary bytes as a message on the injectors' bus, decoded the way
//! every receiver decodes it (each message type, an assignment through the agent's
//! checks, a second record through the coordinator's bound and exact merge). The
//! harness lives in `volley_agents::fuzzing` so the suite's seeded short run drives it
//! too (`crates/agents/tests/fuzz_short.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    volley_agents::fuzzing::bus_messages(data);
});
