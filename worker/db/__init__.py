"""Database adapter: SQLAlchemy 2 models, repositories, the unit of work and migrations."""
