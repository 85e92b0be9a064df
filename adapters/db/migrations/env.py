from __future__ import annotations

from alembic import context

from adapters.db.engine import build_engine
from adapters.db.models import Base

config = context.config
url = config.get_main_option("sqlalchemy.url")
assert url, "sqlalchemy.url must be set"

engine = build_engine(url)
with engine.connect() as connection:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        # SQLite alters tables by copying them; batch mode does that for us.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()
engine.dispose()
