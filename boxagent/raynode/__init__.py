"""This box as a node of a Ray cluster rgt forms (`rgt-client ray up`): the reachability probe
(listen, reach), and starting and stopping Ray here with pinned ports (`rgt-agent ray-node`)."""
