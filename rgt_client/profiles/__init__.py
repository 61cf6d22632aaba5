"""`profiles`: the platform profiles, their schema, and the texts they warn with."""
