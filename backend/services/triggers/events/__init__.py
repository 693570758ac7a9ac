"""The event service: connector triggers heard, verified and turned into runs.

A workflow whose active version starts with a connector trigger of kind ``app_webhook``,
``polling``, ``broker`` or ``email`` has a *subscription* (one row per workflow, following
the active version). Every event any of them hears goes through one *inbox*: a row unique
per ``(workflow, event id)``, stored before anything is acknowledged, then a run started
with the idempotency key ``trigger-event:<row id>``. So each event starts exactly one run,
whatever crashes, redeliveries or re-polls happen.

============================  ===========================================================
module                        holds
============================  ===========================================================
``kinds``                     which trigger kinds the product runs; the publish check
``subscriptions``             following the active version (activate, replace, archive)
``inbox``                     storing events (and a poll's cursor) once; starting runs
``contexts``                  the context trigger code runs in (credentials, HTTP, SSRF)
``polling``                   the poller (scheduler leader): claim, poll, store, back off
``push``                      an app webhook delivery: verify, answer, store, start
``lifecycle``                 registering, checking and deleting hooks at the vendor
``listeners``                 broker and email subscriptions (the events process)
``status``                    what the workflow and run pages show
``sample_fetch``              the designer's "Fetch test event" on the draft's trigger
``samples``                   a fetched sample; an app webhook's listening window
============================  ===========================================================
"""
