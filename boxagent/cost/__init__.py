"""Paid hours: what the box costs, and a warning when it burns money doing nothing.

The costliest failure on a rented box is not a crash: it is a box that finished (or died) at
3 a.m. and kept billing until someone looked. `CostPart` (part.py) counts the box's paid hours
(ledger.py, persisted in RGT_HOME/cost.json), prices them (config.json `cost`), puts them in
status.json (`cost`, `runs[].cost`) and on run-end events, and raises `box_idle`, `budget` and
`danger_clock` events (watch.py decides, texts.py words them in the profile's terms). It never
stops, releases or destroys anything: it tells the user what a verb would destroy.
"""
