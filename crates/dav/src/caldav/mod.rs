//! CalDAV semantics over parsed iCalendar ([`crate::ical`]): zones (`zone`),
//! recurrence (`recur`), calendar-query filters (`filter`), the calendar-data
//! transforms `expand` and `limit-recurrence-set` (`expand`), free-busy
//! (`freebusy`) and what a PUT into a calendar must satisfy (`validate`).

pub(crate) mod expand;
pub(crate) mod filter;
pub(crate) mod freebusy;
pub(crate) mod index;
pub(crate) mod recur;
pub(crate) mod validate;
pub(crate) mod zone;
