//! Client profiles (what each calendar client sends, `session`), and the weighted mix
//! that assigns one to every virtual user.

use crate::OfficeError;

/// A calendar client whose traffic a virtual user reproduces.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Profile {
    /// Thunderbird (Lightning): OPTIONS, ctag or sync-collection polling, multiget.
    Thunderbird,
    /// DAVx5 (Android): uploads first, then sync-collection, multiget 10 at a time.
    Davx5,
    /// Evolution: getctag, calendar-query over -5/+5 weeks, multiget 100 at a time.
    Evolution,
    /// Apple Calendar: the home's calendars, then sync-collection per changed calendar.
    Apple,
}

impl Profile {
    /// Every profile.
    pub const ALL: [Profile; 4] = [
        Profile::Thunderbird,
        Profile::Davx5,
        Profile::Evolution,
        Profile::Apple,
    ];

    /// The name `--profile` takes.
    pub fn name(self) -> &'static str {
        match self {
            Profile::Thunderbird => "thunderbird",
            Profile::Davx5 => "davx5",
            Profile::Evolution => "evolution",
            Profile::Apple => "apple",
        }
    }

    /// The profile called `name` (case-insensitive).
    pub fn parse(name: &str) -> Result<Profile, OfficeError> {
        Profile::ALL
            .into_iter()
            .find(|p| p.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| OfficeError::UnknownProfile(name.trim().to_owned()))
    }

    /// Office-time seconds between two polls: Thunderbird's default refresh (30 min),
    /// DAVx5's shortest periodic sync (15 min, Android's floor), Evolution's and Apple
    /// Calendar's common 15-minute refresh (docs/methodology.md, "The office").
    pub fn poll_interval_s(self) -> f64 {
        match self {
            Profile::Thunderbird => 1800.0,
            Profile::Davx5 | Profile::Evolution | Profile::Apple => 900.0,
        }
    }

    /// Whether the client keeps local changes until its next sync (DAVx5 uploads at
    /// sync time); the others write at once.
    pub fn uploads_at_sync(self) -> bool {
        self == Profile::Davx5
    }

    /// How many hrefs one calendar-multiget asks for.
    pub fn multiget_batch(self) -> usize {
        match self {
            Profile::Davx5 => 10,
            // Thunderbird and Apple fetch what changed in one report; bounded so a
            // large first sync stays a reasonable body.
            Profile::Evolution | Profile::Thunderbird | Profile::Apple => 100,
        }
    }
}

/// Profiles with integer weights: `thunderbird:3,davx5:1`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mix(Vec<(Profile, u32)>);

impl Default for Mix {
    /// All four, equally.
    fn default() -> Self {
        Mix(Profile::ALL.iter().map(|p| (*p, 1)).collect())
    }
}

impl std::fmt::Display for Mix {
    /// The form [`Mix::parse`] reads: `thunderbird:3,davx5:1`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|(p, w)| format!("{}:{w}", p.name()))
            .collect();
        f.write_str(&parts.join(","))
    }
}

impl Mix {
    /// Parses `NAME[:WEIGHT],...` (weight default 1, at least 1; a name at most once).
    pub fn parse(text: &str) -> Result<Mix, OfficeError> {
        let mut out: Vec<(Profile, u32)> = Vec::new();
        for part in text.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, weight) = match part.split_once(':') {
                Some((n, w)) => {
                    let w: u32 = w.trim().parse().ok().filter(|w| *w > 0).ok_or_else(|| {
                        OfficeError::Config(format!(
                            "profile weight must be a positive integer, got `{w}`"
                        ))
                    })?;
                    (n, w)
                }
                None => (part, 1),
            };
            let p = Profile::parse(name)?;
            if out.iter().any(|(q, _)| *q == p) {
                return Err(OfficeError::Config(format!(
                    "profile `{}` given twice",
                    p.name()
                )));
            }
            out.push((p, weight));
        }
        if out.is_empty() {
            return Err(OfficeError::Config("no profile given".into()));
        }
        Ok(Mix(out))
    }

    /// The profiles and weights.
    pub fn parts(&self) -> &[(Profile, u32)] {
        &self.0
    }

    /// The longest poll interval of the mix's profiles, office seconds: what a day's
    /// default length is made of ([`crate::day::default_wall_s`]).
    pub fn slowest_poll_s(&self) -> f64 {
        self.0
            .iter()
            .map(|(p, _)| p.poll_interval_s())
            .fold(0.0, f64::max)
    }

    /// The profile of user `i` of `n`: the users are dealt out in proportion to the
    /// weights (largest remainder), then in the mix's order, so a mix of 3:1 over 20
    /// users gives exactly 15 and 5, whatever the seed.
    pub fn assign(&self, n: usize) -> Vec<Profile> {
        let total: u64 = self.0.iter().map(|(_, w)| u64::from(*w)).sum();
        let mut counts: Vec<(Profile, usize, u64)> = self
            .0
            .iter()
            .map(|(p, w)| {
                let exact = n as u64 * u64::from(*w);
                (*p, (exact / total) as usize, exact % total)
            })
            .collect();
        let mut left = n - counts.iter().map(|c| c.1).sum::<usize>();
        let mut order: Vec<usize> = (0..counts.len()).collect();
        order.sort_by(|a, b| counts[*b].2.cmp(&counts[*a].2).then(a.cmp(b)));
        for i in order {
            if left == 0 {
                break;
            }
            counts[i].1 += 1;
            left -= 1;
        }
        counts
            .into_iter()
            .flat_map(|(p, k, _)| std::iter::repeat_n(p, k))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mix_parses_names_and_weights() {
        let m = Mix::parse("thunderbird:3, DAVx5").unwrap();
        assert_eq!(m.parts(), &[(Profile::Thunderbird, 3), (Profile::Davx5, 1)]);
        assert!(matches!(
            Mix::parse("outlook"),
            Err(OfficeError::UnknownProfile(n)) if n == "outlook"
        ));
        assert!(Mix::parse("apple:0").is_err());
        assert!(Mix::parse("apple,apple:2").is_err());
        assert!(Mix::parse(" , ").is_err());
    }

    #[test]
    fn users_are_dealt_by_weight() {
        let m = Mix::parse("thunderbird:3,davx5:1").unwrap();
        let a = m.assign(20);
        assert_eq!(a.iter().filter(|p| **p == Profile::Thunderbird).count(), 15);
        assert_eq!(a.iter().filter(|p| **p == Profile::Davx5).count(), 5);
        let all = Mix::default().assign(6);
        assert_eq!(all.len(), 6);
        // 6 over 4 equal weights: the first two get the remainders.
        assert_eq!(
            all.iter().filter(|p| **p == Profile::Thunderbird).count(),
            2
        );
        assert_eq!(all.iter().filter(|p| **p == Profile::Apple).count(), 1);
    }
}
