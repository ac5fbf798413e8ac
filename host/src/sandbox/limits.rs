//! Per-call limits: defaults, the operator's maximums, and what a manifest asks for.

use super::host::http::MAX_BODY_BYTES;
use crate::config::LimitSettings;
use crate::store::{MemoryQuota, StateQuota};
use std::time::Duration;

const MIB: u64 = 1 << 20;

/// Room in [`Limits::copy_limit`] for what travels beside the largest value: a result's
/// typed blocks, a request's headers, a file's path.
const COPY_SLACK: u64 = 1 << 20;

/// The limits one call runs under.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Fuel (roughly, wasm instructions).
    pub fuel: u64,
    /// Wall-clock deadline.
    pub timeout: Duration,
    /// Linear memory cap, in bytes, across the instance's memories.
    pub memory_bytes: u64,
    /// Largest result, in bytes.
    pub max_result_bytes: u64,
    /// Most log output kept, in bytes.
    pub max_log_bytes: u64,
    /// Most bytes the memory root may hold after a write through the skill's `memory` import.
    pub memory_quota_bytes: u64,
    /// Most files the memory root may hold after such a write.
    pub memory_quota_files: u64,
    /// Most bytes (keys plus values) in the skill's state namespace.
    pub state_quota_bytes: u64,
    /// Most keys in the skill's state namespace.
    pub state_quota_keys: u64,
}

impl Limits {
    /// Built-in defaults, used where neither config nor manifest says otherwise.
    pub const DEFAULT: Limits = Limits {
        fuel: 1_000_000_000,
        timeout: Duration::from_secs(10),
        memory_bytes: 128 << 20,
        max_result_bytes: 1 << 20,
        max_log_bytes: 64 << 10,
        memory_quota_bytes: 64 * MIB,
        memory_quota_files: 1_000,
        state_quota_bytes: 16 * MIB,
        state_quota_keys: 10_000,
    };

    /// Built-in maximums, used where the config names none. Fuel's is high enough that a
    /// call's deadline (at most `timeout`), not fuel, stops ordinary work: CPython spends
    /// 7-8 G units a second on the 2-core machine measured, a fast core twice that.
    pub const MAXIMUM: Limits = Limits {
        fuel: 1_000_000_000_000,
        timeout: Duration::from_secs(300),
        memory_bytes: 1 << 30,
        max_result_bytes: 16 << 20,
        max_log_bytes: 1 << 20,
        memory_quota_bytes: 1 << 30,
        memory_quota_files: 10_000,
        state_quota_bytes: 256 * MIB,
        state_quota_keys: 100_000,
    };

    /// `self` with every field that `settings` sets replaced.
    pub fn overlay(self, settings: &LimitSettings) -> Limits {
        Limits {
            fuel: settings.fuel.unwrap_or(self.fuel),
            timeout: settings.timeout_ms.map(Duration::from_millis).unwrap_or(self.timeout),
            memory_bytes: settings.memory_mb.map(|mb| mb << 20).unwrap_or(self.memory_bytes),
            max_result_bytes: settings.max_result_bytes.unwrap_or(self.max_result_bytes),
            max_log_bytes: settings.max_log_bytes.unwrap_or(self.max_log_bytes),
            memory_quota_bytes: settings.memory_quota_mb.map_or(self.memory_quota_bytes, mib),
            memory_quota_files: settings.memory_quota_files.unwrap_or(self.memory_quota_files),
            state_quota_bytes: settings.state_quota_mb.map_or(self.state_quota_bytes, mib),
            state_quota_keys: settings.state_quota_keys.unwrap_or(self.state_quota_keys),
        }
    }

    /// Each field no larger than `max`'s.
    pub fn clamp(self, max: &Limits) -> Limits {
        Limits {
            fuel: self.fuel.min(max.fuel),
            timeout: self.timeout.min(max.timeout),
            memory_bytes: self.memory_bytes.min(max.memory_bytes),
            max_result_bytes: self.max_result_bytes.min(max.max_result_bytes),
            max_log_bytes: self.max_log_bytes.min(max.max_log_bytes),
            memory_quota_bytes: self.memory_quota_bytes.min(max.memory_quota_bytes),
            memory_quota_files: self.memory_quota_files.min(max.memory_quota_files),
            state_quota_bytes: self.state_quota_bytes.min(max.state_quota_bytes),
            state_quota_keys: self.state_quota_keys.min(max.state_quota_keys),
        }
    }

    /// The most bytes the host copies out of the guest in one go: the value a call returns,
    /// or the arguments of one host import (wasmtime's hostcall fuel, counted as it lifts
    /// them, before it allocates). That is the largest thing a call may hand over whole (its
    /// result, one file for `memory`, one value for `state`, an HTTP body) plus room for the
    /// rest of the record, so a result far past `max_result_bytes` is refused before the
    /// host copies it, and one within it is measured and refused after.
    pub fn copy_limit(&self) -> u64 {
        let largest = [
            self.max_result_bytes,
            self.max_log_bytes,
            self.memory_quota_bytes,
            self.state_quota_bytes,
            MAX_BODY_BYTES as u64,
        ];
        largest.into_iter().max().unwrap_or(0).saturating_add(COPY_SLACK)
    }

    /// The quota on the memory root for writes through the skill's `memory` import.
    pub fn memory_quota(&self) -> MemoryQuota {
        MemoryQuota { max_bytes: self.memory_quota_bytes, max_files: self.memory_quota_files }
    }

    /// The quota on the skill's state namespace.
    pub fn state_quota(&self) -> StateQuota {
        StateQuota { max_bytes: self.state_quota_bytes, max_keys: self.state_quota_keys }
    }
}

fn mib(mb: u64) -> u64 {
    mb.saturating_mul(MIB)
}

/// The operator's limit policy: defaults for every skill and the maximums none may exceed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitPolicy {
    /// Applied when a manifest sets nothing.
    pub defaults: Limits,
    /// The ceiling.
    pub maximums: Limits,
}

impl Default for LimitPolicy {
    fn default() -> Self {
        LimitPolicy { defaults: Limits::DEFAULT, maximums: Limits::MAXIMUM }
    }
}

impl LimitPolicy {
    /// From `sandbox.defaults` and `sandbox.maximums`.
    pub fn from_config(defaults: &LimitSettings, maximums: &LimitSettings) -> Self {
        let maximums = Limits::MAXIMUM.overlay(maximums);
        LimitPolicy { defaults: Limits::DEFAULT.overlay(defaults).clamp(&maximums), maximums }
    }

    /// The limits of a skill whose manifest asks for `requested`.
    pub fn for_skill(&self, requested: &LimitSettings) -> Limits {
        self.defaults.overlay(requested).clamp(&self.maximums)
    }
}

/// Enforces the memory cap during one call, and remembers whether it refused growth so a
/// later trap can be reported as "memory cap" rather than as a crash.
#[derive(Debug)]
pub struct MemoryLimiter {
    cap: u64,
    used: u64,
    /// Set when a grow request was refused.
    pub hit: bool,
}

impl MemoryLimiter {
    /// A limiter allowing `cap` bytes of linear memory in total.
    pub fn new(cap: u64) -> Self {
        MemoryLimiter { cap, used: 0, hit: false }
    }

    /// The linear memory granted so far, in bytes (the peak: memory never shrinks).
    pub fn used(&self) -> u64 {
        self.used
    }
}

const MAX_TABLE_ELEMENTS: usize = 1 << 20;

impl wasmtime::ResourceLimiter for MemoryLimiter {
    fn memory_growing(&mut self, current: usize, desired: usize, _maximum: Option<usize>) -> wasmtime::Result<bool> {
        let growth = desired.saturating_sub(current) as u64;
        if self.used.saturating_add(growth) > self.cap {
            self.hit = true;
            return Ok(false);
        }
        self.used += growth;
        Ok(true)
    }

    fn table_growing(&mut self, _current: usize, desired: usize, _max: Option<usize>) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifest_requests_are_clamped_to_operator_maximums() {
        let policy = LimitPolicy::from_config(
            &LimitSettings { timeout_ms: Some(2_000), ..Default::default() },
            &LimitSettings { timeout_ms: Some(5_000), memory_mb: Some(64), ..Default::default() },
        );
        assert_eq!(policy.defaults.timeout, Duration::from_secs(2));
        assert_eq!(policy.defaults.memory_bytes, 64 << 20, "defaults above the maximum are clamped");
        let asked = LimitSettings { timeout_ms: Some(60_000), fuel: Some(7), ..Default::default() };
        let limits = policy.for_skill(&asked);
        assert_eq!(limits.timeout, Duration::from_secs(5));
        assert_eq!(limits.fuel, 7);
    }

    #[test]
    fn quotas_have_defaults_and_are_clamped() {
        let policy = LimitPolicy::default();
        let limits = policy.for_skill(&LimitSettings::default());
        assert_eq!(limits.memory_quota(), MemoryQuota { max_bytes: 64 << 20, max_files: 1_000 });
        assert_eq!(limits.state_quota(), StateQuota { max_bytes: 16 << 20, max_keys: 10_000 });
        let policy = LimitPolicy::from_config(
            &LimitSettings { state_quota_keys: Some(50), ..Default::default() },
            &LimitSettings { memory_quota_mb: Some(8), memory_quota_files: Some(20), ..Default::default() },
        );
        let asked = LimitSettings { memory_quota_mb: Some(u64::MAX), state_quota_mb: Some(2), ..Default::default() };
        let limits = policy.for_skill(&asked);
        assert_eq!(limits.memory_quota(), MemoryQuota { max_bytes: 8 << 20, max_files: 20 });
        assert_eq!(limits.state_quota(), StateQuota { max_bytes: 2 << 20, max_keys: 50 });
    }

    #[test]
    fn limiter_counts_all_memories_together() {
        use wasmtime::ResourceLimiter;
        let mut l = MemoryLimiter::new(100);
        assert!(l.memory_growing(0, 60, None).unwrap());
        assert!(!l.memory_growing(0, 60, None).unwrap());
        assert!(l.hit);
    }
}
