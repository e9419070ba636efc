"""One ComponentResource per concern; each file holds a component and its typed args."""
