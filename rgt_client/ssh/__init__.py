"""`rgt-client ssh-close`: the shared ssh connection to a box, ended on demand."""
