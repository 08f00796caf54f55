/* A script's named subs and formats and the file-level lexicals they
 * captured: found once the script compiled, and pointed after each run at
 * that run's successor's variables, so that they do not "stay shared" with
 * the first run's (part of the script registry, perl_registry.h). */
#include "perl_registry.h"
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>

struct capture_walk {
	CV **cvs; /* the wrapper, then named subs nested in it */
	size_t ncvs, cap;
	HV *seen; /* stashes visited */
};

static void consider_cv(pTHX_ CV *cv, struct capture_walk *w)
{
	if (!cv || CvISXSUB(cv) || !CvOUTSIDE(cv) || CvANON(cv))
		return;
	for (size_t i = 0; i < w->ncvs; i++) {
		if (w->cvs[i] == cv)
			return;
	}
	/* Nested in the wrapper, or in a named sub nested in it. The walk is
	 * repeated until nothing new is found, so the order of discovery does
	 * not matter. */
	for (size_t i = 0; i < w->ncvs; i++) {
		if (CvOUTSIDE(cv) == w->cvs[i]) {
			if (w->ncvs == w->cap) {
				w->cap *= 2;
				w->cvs = xrealloc(w->cvs, w->cap * sizeof *w->cvs);
			}
			w->cvs[w->ncvs++] = cv;
			return;
		}
	}
}

static void walk_stash(pTHX_ HV *stash, struct capture_walk *w, int depth)
{
	if (!stash || depth > 64)
		return;
	char key[sizeof(void *) * 2 + 3];
	int klen = snprintf(key, sizeof key, "%p", (void *)stash);
	if (hv_exists(w->seen, key, klen))
		return;
	(void)hv_store(w->seen, key, klen, &PL_sv_yes, 0);
	SvREFCNT_inc_simple_void_NN(&PL_sv_yes);

	for (STRLEN b = 0; b <= HvMAX(stash); b++) {
		for (HE *he = HvARRAY(stash)[b]; he; he = HeNEXT(he)) {
			SV *val = HeVAL(he);
			if (!val)
				continue;
			if (SvROK(val) && SvTYPE(SvRV(val)) == SVt_PVCV) {
				consider_cv(aTHX_(CV *) SvRV(val), w);
				continue;
			}
			if (!isGV_with_GP(val))
				continue;
			GV *gv = (GV *)val;
			consider_cv(aTHX_ GvCV(gv), w);
			consider_cv(aTHX_ GvFORM(gv), w);
			I32 len = HeKLEN(he);
			const char *name = HeKEY(he);
			if (len > 2 && name[len - 1] == ':' && name[len - 2] == ':' && GvHV(gv))
				walk_stash(aTHX_ GvHV(gv), w, depth + 1);
		}
	}
}

/* Finds the named subs and formats compiled inside the script (possibly
 * in other packages) and records, for each of their captured outer
 * lexicals, where the variable lives in the enclosing sub's pad. */
void perl_registry_captures(pTHX_ struct perl_script *s)
{
	struct capture_walk w = { .cap = 16 };
	w.cvs = xmalloc(w.cap * sizeof *w.cvs);
	w.cvs[w.ncvs++] = s->code;
	w.seen = newHV();
	size_t before;
	do {
		before = w.ncvs;
		hv_clear(w.seen);
		walk_stash(aTHX_ PL_defstash, &w, 0);
		/* END blocks are in no stash, and close over file lexicals
		 * as often as named subs do ("my $dbh; END { ... }"). */
		for (Size_t i = 0; s->ends && i < av_count(s->ends); i++)
			consider_cv(aTHX_(CV *) AvARRAY(s->ends)[i], &w);
	} while (w.ncvs != before);
	SvREFCNT_dec(w.seen);

	size_t cap = 0;
	for (size_t i = 1; i < w.ncvs; i++) {
		CV *inner = w.cvs[i];
		PADLIST *pl = CvPADLIST(inner);
		if (!pl)
			continue;
		PADNAMELIST *names = PadlistNAMES(pl);
		PADNAME **name = PadnamelistARRAY(names);
		for (SSize_t ix = 1; ix <= PadnamelistMAX(names); ix++) {
			PADNAME *pn = name[ix];
			if (!pn || !PadnameLEN(pn) || !PadnameOUTER(pn) || PadnameIsOUR(pn)
					|| PadnameIsSTATE(pn) || PadnamePV(pn)[0] == '&')
				continue;
			if (s->ncaptures == cap) {
				cap = cap ? cap * 2 : 8;
				s->captures = xrealloc(s->captures, cap * sizeof *s->captures);
			}
			s->captures[s->ncaptures++] = (struct perl_capture){
				.inner = inner,
				.inner_ix = (PADOFFSET)ix,
				.outer = CvOUTSIDE(inner),
				.outer_ix = PARENT_PAD_INDEX(pn),
			};
		}
	}
	free(w.cvs);
}

/* The wrapper's `my` variables that a named sub captured are replaced by
 * new ones when the wrapper returns (the named sub still holds the old
 * one). Pointing the named subs at the replacements makes the next run's
 * `my $x = ...` visible to them, as it is under CGI. Captures were
 * recorded outer before inner, so a sub nested two deep picks up its
 * parent's updated slot. */
void perl_registry_rebind(pTHX_ struct perl_script *s)
{
	for (size_t i = 0; i < s->ncaptures; i++) {
		struct perl_capture *c = &s->captures[i];
		PADLIST *outer = CvPADLIST(c->outer);
		if (!outer || PadlistMAX(outer) < 1)
			continue;
		PAD *opad = PadlistARRAY(outer)[1];
		if (!opad || (SSize_t)c->outer_ix > PadMAX(opad))
			continue;
		SV *now = PadARRAY(opad)[c->outer_ix];
		PADLIST *inner = CvPADLIST(c->inner);
		if (!now || !inner)
			continue;
		for (SSize_t d = 1; d <= PadlistMAX(inner); d++) {
			PAD *pad = PadlistARRAY(inner)[d];
			if (!pad || (SSize_t)c->inner_ix > PadMAX(pad))
				continue;
			SV **slot = &PadARRAY(pad)[c->inner_ix];
			if (*slot == now)
				continue;
			SV *old = *slot;
			*slot = SvREFCNT_inc_simple_NN(now);
			SvREFCNT_dec(old);
		}
	}
}
