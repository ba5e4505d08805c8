package events

// camelVerb is the first CamelCase word in text that begins with a
// storage verb ("MountDevice", "AttachDisk") and is not a field's name in
// a dumped Go value: %+v and the kubelet's "Unhandled Error" records
// write a struct as &Container{Name:x,VolumeMounts:[]VolumeMount{...},
// MountPath:/x,...}, where a word after '{' or ',' and before ':' is a
// key the struct has whatever the record did, not what it did.
func camelVerb(text string) string {
	for _, m := range reCamelVerb.FindAllStringIndex(text, 16) {
		if structField(text, m[0], m[1]) {
			continue
		}
		return text[m[0]:m[1]]
	}
	return ""
}

// structField says whether text[i:j] is a field's name in a dumped Go
// value: right after the '{' that opens the value or the ',' that ends
// the field before, and right before its ':'.
func structField(text string, i, j int) bool {
	if i == 0 || j >= len(text) || text[j] != ':' {
		return false
	}
	return text[i-1] == '{' || text[i-1] == ','
}
