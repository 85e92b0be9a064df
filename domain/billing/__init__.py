"""Organizations and their billing accounts, with the currencies and tax ids an account is
registered with."""
