#!/usr/bin/python3
"""A real CalDAV client (python-caldav) against `volley serve`: discovery, MKCALENDAR,
PUT, calendar-query with a time range, calendar-multiget, sync-collection (a deletion
must appear), and a 412 on a stale If-Match. Exits non-zero with a reason on any
failure; run by tests/dav_clients.rs.

Arguments: URL [PRINCIPAL_PATH [USER PASSWORD]]. URL is where discovery starts (the
anonymous server's collection, or `/.well-known/caldav` of a multi-user one, which
redirects); PRINCIPAL_PATH is where the principal must be found (default /cal/); with
USER and PASSWORD the client authenticates with HTTP Basic and must also find the
account's default calendar."""

import datetime
import sys

import caldav

EVENT = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//volley//test//EN
BEGIN:VEVENT
UID:{uid}
DTSTAMP:20240101T000000Z
DTSTART:{start}
DTEND:{end}
SUMMARY:{summary}
END:VEVENT
END:VCALENDAR
"""

TODO = """BEGIN:VCALENDAR
VERSION:2.0
PRODID:-//volley//test//EN
BEGIN:VTODO
UID:todo-1
DTSTAMP:20240101T000000Z
DUE:20240110T120000Z
SUMMARY:File report
END:VTODO
END:VCALENDAR
"""


def check(cond, what):
    if not cond:
        print("FAIL: " + what, file=sys.stderr)
        sys.exit(1)
    print("ok: " + what)


def main():
    base = sys.argv[1]
    home = sys.argv[2] if len(sys.argv) > 2 else "/cal/"
    user, password = (sys.argv[3], sys.argv[4]) if len(sys.argv) > 4 else (None, None)
    client = caldav.DAVClient(url=base, username=user, password=password)
    principal = client.principal()
    check(str(principal.url).endswith(home), "principal discovered at %s (%s)" % (home, principal.url))
    if user:
        try:
            caldav.DAVClient(url=base).request(str(principal.url), "PROPFIND", "", {"Depth": "0"})
            refused = False
        except caldav.lib.error.AuthorizationError:
            refused = True
        check(refused, "without credentials: 401")
        names = [str(c.url) for c in principal.calendars()]
        check(any(n.endswith(home + "calendar/") for n in names),
              "default calendar listed (%s)" % names)

    cal = principal.make_calendar(name="Volley test", cal_id="work")
    names = [str(c.url) for c in principal.calendars()]
    check(any(n.endswith(home + "work/") for n in names), "new calendar is listed (%s)" % names)
    check(cal.get_properties([caldav.elements.dav.DisplayName()]).get("{DAV:}displayname") == "Volley test",
          "display name from MKCALENDAR body")

    e1 = cal.save_event(EVENT.format(uid="ev-1", start="20240110T100000Z", end="20240110T110000Z",
                                     summary="Standup"))
    e2 = cal.save_event(EVENT.format(uid="ev-2", start="20240301T100000Z", end="20240301T110000Z",
                                     summary="Review"))
    t1 = cal.save_todo(TODO)

    found = cal.search(start=datetime.datetime(2024, 1, 10, tzinfo=datetime.timezone.utc),
                       end=datetime.datetime(2024, 1, 11, tzinfo=datetime.timezone.utc),
                       event=True, expand=False)
    uids = sorted(str(o.vobject_instance.vevent.uid.value) for o in found)
    check(uids == ["ev-1"], "time-range calendar-query finds exactly ev-1 (%s)" % uids)

    got = cal.calendar_multiget([e2.url, t1.url])
    datas = sorted(o.data for o in got)
    check(len(datas) == 2 and "UID:ev-2" in "".join(datas) and "UID:todo-1" in "".join(datas),
          "calendar-multiget returns both objects with calendar-data")

    first = cal.objects_by_sync_token(load_objects=False)
    token = first.sync_token
    check(len(list(first)) == 3 and token, "initial sync lists 3 objects and gives a token")

    e1_url = str(e1.url)
    e1.delete()
    e2.data = EVENT.format(uid="ev-2", start="20240301T100000Z", end="20240301T120000Z",
                           summary="Review, longer")
    e2.save()
    changes = cal.objects_by_sync_token(sync_token=token, load_objects=False)
    changed = sorted(str(o.url) for o in changes)
    check(e1_url in changed and str(e2.url) in changed and str(t1.url) not in changed,
          "sync since token reports the deletion and the change only (%s)" % changed)
    check(changes.sync_token != token, "sync token advanced")

    stale = client.put(str(e2.url), e2.data, {"If-Match": '"0000000000000000-0"',
                                              "Content-Type": "text/calendar"})
    check(stale.status == 412, "stale If-Match gives 412 (got %s)" % stale.status)
    fresh = client.request(str(e2.url), "GET")
    etag = fresh.headers.get("ETag")
    ok = client.put(str(e2.url), e2.data, {"If-Match": etag, "Content-Type": "text/calendar"})
    check(ok.status == 204, "current If-Match gives 204 (got %s)" % ok.status)
    dup = client.put(str(t1.url), TODO, {"If-None-Match": "*", "Content-Type": "text/calendar"})
    check(dup.status == 412, "If-None-Match: * on an existing object gives 412 (got %s)" % dup.status)
    print("all caldav checks passed")


if __name__ == "__main__":
    main()
