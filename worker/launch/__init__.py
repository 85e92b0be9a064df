"""How the production processes start: the command lines of a worker node, beat, the API and
Flower, and a data directory kept to its owner."""
