"""The database adapter (SQLAlchemy 2): the tables and their row mapping, the repositories and
the unit of work, the command log, the console's reads, the API clients' store, the migrations."""
