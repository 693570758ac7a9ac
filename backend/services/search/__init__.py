"""Search: the search box's use case.

Parse the query, work out what the caller may see with the same rules as every list,
and ask the configured backend (:mod:`backend.search`).

Public modules (the surface: modules outside the package import only these):

- ``search``: The search use case: parse the query, work out what the caller may see with
  the same rules as every list (:mod:`backend.services.identity.access`), and ask the
  configured backend.

Private modules (imported only inside the package):

- none
"""
