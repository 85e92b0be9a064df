"""What an operator sees of commands: how one ended (outcomes), how long the log keeps it
(retention), and the console's read side."""
