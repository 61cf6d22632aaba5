"""`rgt-client ray up/down`: a Ray cluster on your boxes, formed through their agents."""
