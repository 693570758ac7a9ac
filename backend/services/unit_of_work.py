"""The unit of work the web layers hand to service functions.

Controllers and pages never import SQLAlchemy: they receive the request's open session
(committed when the handler returns without error, rolled back otherwise) typed as
:data:`UnitOfWork` and pass it, unopened, to the service functions that read and write
through it. Only ``backend.services`` and ``backend.db`` know what it is.
"""

from __future__ import annotations

from typing import TypeAlias

from sqlalchemy.ext.asyncio import AsyncSession

UnitOfWork: TypeAlias = AsyncSession
"""An open database session in a transaction (SQLAlchemy's ``AsyncSession``)."""
